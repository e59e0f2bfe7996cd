"""The three models int8store plans memory for (``int8store budget --model``):
the classic tutorials' logistic regression, multilayer perceptron and LeNet5,
described without Aesara (their graphs are built in
:mod:`int8store.memory.reference_models`).

LeNet5 keeps the classic 5x5 filters on 28x28 images and takes smaller ones
on smaller images (3x3 then 2x2 on scikit-learn's 8x8 digits), always two
convolution/pooling layers; the bundled tutorial uses the same geometry.
"""

from ..errors import ArgumentError

__all__ = ["MODELS", "filter_size", "lenet5_geometry", "LENET5_SMALLEST"]

#: Model names, with the classic tutorials' batch size.
MODELS = {"logistic": 600, "mlp": 20, "lenet5": 500}

#: The fewest rows (and columns) LeNet5's two convolution/pooling layers take:
#: on 4 the first layer's 3x3 filter and pooling leave a pixel, too few for the second.
LENET5_SMALLEST = 5


def filter_size(size, largest=5):
    """The largest filter (up to ``largest``) whose valid convolution of
    ``size`` pixels leaves an even count of at least 2, for 2x2 pooling."""
    for f in range(min(largest, size), 0, -1):
        if (size - f + 1) % 2 == 0:
            return f
    raise ValueError(
        f"images of {size} pixels are too small for a convolution and a 2x2 pooling")


def lenet5_geometry(image_shape, source=None):
    """Channels, and the (filter rows, filter cols) and output size of each
    conv/pool layer: 5x5 filters on 28x28 as in the classic, smaller ones
    (3x3 then 2x2) on 8x8 digits, always two conv/pool layers. Images flat
    or smaller than :data:`LENET5_SMALLEST` pixels a side are refused
    (:class:`~int8store.ArgumentError`), naming ``source`` (the dataset)."""
    if len(image_shape) not in (2, 3):
        size = f"{'x'.join(map(str, image_shape))} values, not rows and columns"
    elif min(image_shape[:2]) < LENET5_SMALLEST:
        size = f"{image_shape[0]}x{image_shape[1]} pixels"
    else:
        size = None
    if size:
        raise ArgumentError(
            f"{f'{source}: ' if source else ''}images of {size}; LeNet5's two convolution "
            f"and 2x2 pooling layers take images of {LENET5_SMALLEST}x{LENET5_SMALLEST} pixels "
            "or more: use larger images, or a model of any size (logistic_sgd.py, mlp.py)")
    rows, cols = image_shape[:2]
    channels = image_shape[2] if len(image_shape) == 3 else 1
    layers = []
    for largest in (5 if min(rows, cols) >= 20 else 3, 5):
        f_rows, f_cols = filter_size(rows, largest), filter_size(cols, largest)
        rows, cols = (rows - f_rows + 1) // 2, (cols - f_cols + 1) // 2
        layers.append(((f_rows, f_cols), (rows, cols)))
    return channels, layers
