"""The two models int8store plans memory for (``int8store budget --model``):
the classic tutorials' logistic regression and LeNet5, described without
Aesara (their graphs are built in :mod:`int8store.memory.reference_models`).

LeNet5 keeps the classic 5x5 filters on 28x28 images and takes smaller ones
on smaller images (3x3 then 2x2 on scikit-learn's 8x8 digits), always two
convolution/pooling layers; the bundled tutorial uses the same geometry.
"""

__all__ = ["MODELS", "filter_size", "lenet5_geometry"]

#: Model names, with the classic tutorials' batch size.
MODELS = {"logistic": 600, "lenet5": 500}


def filter_size(size, largest=5):
    """The largest filter (up to ``largest``) whose valid convolution of
    ``size`` pixels leaves an even count of at least 2, for 2x2 pooling."""
    for f in range(min(largest, size), 0, -1):
        if (size - f + 1) % 2 == 0:
            return f
    raise ValueError(
        f"images of {size} pixels are too small for a convolution and a 2x2 pooling")


def lenet5_geometry(image_shape):
    """Channels, and the (filter rows, filter cols) and output size of each
    conv/pool layer: 5x5 filters on 28x28 as in the classic, smaller ones
    (3x3 then 2x2) on 8x8 digits, always two conv/pool layers."""
    rows, cols = image_shape[:2]
    channels = image_shape[2] if len(image_shape) == 3 else 1
    layers = []
    for largest in (5 if min(rows, cols) >= 20 else 3, 5):
        f_rows, f_cols = filter_size(rows, largest), filter_size(cols, largest)
        rows, cols = (rows - f_rows + 1) // 2, (cols - f_cols + 1) // 2
        layers.append(((f_rows, f_cols), (rows, cols)))
    return channels, layers
