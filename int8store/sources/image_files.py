"""One image file: how large it may be, and its pixels decoded by Pillow as
8-bit grey or colour, refusing what that would change silently
(transparency, 16-bit or other modes). :mod:`.images` reads folders and
archives of them.
"""

import io
import warnings

import numpy as np

from ..errors import ArgumentError, SizeLimitError, SourceFormatError, quoted
from ..runtime.limits import check_memory, describe_bytes

__all__ = ["RASTER_FORMATS", "largest_image_file", "check_image_file_size", "read_image_file",
           "parsed_resize", "check_resize", "decode_image", "decoded", "in_colour",
           "in_colour_by_header"]

#: The only formats Pillow may decode, whatever a file's name or content says:
#: raster formats with decoders in Pillow itself. Pillow would otherwise try
#: every format it knows, EPS included, which hands the file to Ghostscript.
RASTER_FORMATS = ("PNG", "JPEG", "BMP", "GIF", "TIFF", "WEBP", "PPM")
_GRAY, _COLOUR = "L", "RGB"
_PALETTE = ("P", "PA")


# The widest pixel the formats above store before int8store refuses its mode
# (16-bit RGBA: 8 bytes; compressed formats store less), and room for what an
# image file holds besides pixels (ICC profile, EXIF, XMP, palette).
_BYTES_PER_PIXEL = 8
_METADATA_ROOM = 16 << 20


def largest_image_file():
    """Most bytes an image file may take and still be read: Pillow's
    decompression-bomb limit (``PIL.Image.MAX_IMAGE_PIXELS``) at 8 bytes a
    pixel, plus 16 MiB of metadata; None if that limit is switched off."""
    from PIL import Image

    pixels = Image.MAX_IMAGE_PIXELS
    return pixels * _BYTES_PER_PIXEL + _METADATA_ROOM if pixels else None


def check_image_file_size(nbytes, where):
    """Refuse an image file of ``nbytes`` that no allowed image needs, or that
    would not fit under the memory ceiling, before any of it is read."""
    from PIL import Image

    largest = largest_image_file()
    if largest is not None and nbytes > largest:
        raise SizeLimitError(
            f"{where}: is {describe_bytes(nbytes)}, more than any image int8store decodes "
            f"can take ({describe_bytes(largest)}: Pillow's limit of "
            f"{Image.MAX_IMAGE_PIXELS:,} pixels at {_BYTES_PER_PIXEL} bytes each, plus "
            f"{describe_bytes(_METADATA_ROOM)} of metadata)")
    check_memory(nbytes, "the image file", where)


def read_image_file(stream, nbytes, where):
    """The ``nbytes`` bytes of an image file, checked before reading and never
    read past (a file that grew, or a member that unpacks to more than it
    announced, is damaged)."""
    check_image_file_size(nbytes, where)
    data = stream.read(nbytes + 1)
    if len(data) != nbytes:
        how = "more" if len(data) > nbytes else f"only {len(data):,}"
        raise SourceFormatError(f"{where}: holds {how} bytes than the {nbytes:,} it announced "
                                "when listed; the file or archive is damaged or changing")
    return data


def decode_image(data, origin, resize=None, colour=False):
    """uint8 pixels of an encoded image: (rows, cols) grey or (rows, cols, 3) colour.

    Only :data:`RASTER_FORMATS` are decoded, and an image larger than
    Pillow's decompression-bomb limit (``PIL.Image.MAX_IMAGE_PIXELS``) or
    the memory ceiling is refused before its pixels are decoded. A palette
    image of greys only (a GIF has no grey mode) is grey. With
    ``colour=True`` a grey image is colour, its grey in each channel (what
    a set of colour images holds it as: nothing is lost).
    """
    pixels = decoded(data, origin, resize)
    return in_colour(pixels) if colour and pixels.ndim == 2 else pixels


def decoded(data, origin, resize=None):
    """The pixels of :func:`decode_image`, grey or colour as the file is."""
    from PIL import Image, UnidentifiedImageError

    if not len(data):
        raise SourceFormatError(f"{origin}: cannot read this image: the file is empty (0 bytes)")
    if _is_png(data) and data[24] == 16:  # (Pillow reads 16-bit colour as 8-bit, cut silently)
        raise SourceFormatError(f"{origin}: a PNG of 16 bits a channel; int8store stores 8-bit "
                                "pixels, so convert it to 8 bits first")
    try:
        with warnings.catch_warnings():
            # Pillow warns between its limit and twice it; _check_size refuses instead.
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(data), formats=RASTER_FORMATS)
        with image:
            _check_size(image, origin)
            image.load()
            image = _as_8bit(image, origin)
    except SourceFormatError:
        raise
    except Image.DecompressionBombError as error:
        raise SizeLimitError(f"{origin}: beyond Pillow's decompression-bomb limit "
                             f"({quoted(error)})") from error
    except UnidentifiedImageError as error:  # its own text names an in-memory buffer
        known = _format_by_signature(data)
        if known is not None:
            raise SourceFormatError(f"{origin}: cannot read this image: a damaged or truncated "
                                    f"{known} file (its header cannot be read)") from error
        raise SourceFormatError(
            f"{origin}: cannot read this image: its bytes are none of the formats int8store "
            f"decodes ({', '.join(RASTER_FORMATS)}): a damaged file, or another format under an "
            "image's name; export it again or remove it") from error
    except (OSError, SyntaxError, ValueError) as error:  # (Pillow's words for a damaged file)
        raise SourceFormatError(f"{origin}: cannot read this image ({quoted(error)}): damaged "
                                "or cut short; export it again or remove it") from error
    if resize is not None:
        rows, cols = resize
        image = image.resize((cols, rows), Image.Resampling.BICUBIC)
    return np.asarray(image, dtype=np.uint8)


_PNG = b"\x89PNG\r\n\x1a\n"
# Colour by a PNG's colour type: grey, colour, palette (None: its pixels tell), grey
# and alpha, colour and alpha.
_PNG_COLOUR = {0: False, 2: True, 3: None, 4: False, 6: True}
# The first bytes of the formats decoded, to tell a damaged file of one from another format.
_SIGNATURES = ((_PNG, "PNG"), (b"\xff\xd8\xff", "JPEG"), (b"GIF8", "GIF"),
               (b"BM", "BMP"), (b"II*\x00", "TIFF"), (b"MM\x00*", "TIFF"))


def _is_png(data):
    """Whether ``data`` starts as a PNG, its header (IHDR) whole."""
    return bytes(data[:8]) == _PNG and bytes(data[12:16]) == b"IHDR" and len(data) > 25


def _format_by_signature(data):
    """The format whose signature ``data`` starts with, or None."""
    head = bytes(data[:12])
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "WebP"
    return next((name for signature, name in _SIGNATURES if head.startswith(signature)), None)


def in_colour(grey):
    """Grey pixels as colour ones, the grey in each channel."""
    return np.repeat(grey[..., None], 3, axis=-1)


def parsed_resize(resize):
    """``(rows, cols)`` of ``resize``: a pair of positive integers, or text
    such as ``"28x28"`` (as ``--resize`` takes it)."""
    try:
        pair = resize.lower().split("x") if isinstance(resize, str) else list(resize)
        rows, cols = (int(n) for n in pair)
        if rows < 1 or cols < 1 or [rows, cols] != [float(n) for n in pair]:
            raise ValueError
    except (TypeError, ValueError):
        raise ArgumentError(f"resize {resize!r} (--resize): expected ROWSxCOLS such as 28x28, "
                            "or (rows, cols), positive integers") from None
    return rows, cols


def check_resize(resize, origin):
    """Refuse a size to resize every image to that no image may have:
    beyond Pillow's decompression-bomb limit, or whose colour pixels (and
    the resize's working copy) would not fit under the memory ceiling."""
    from PIL import Image

    rows, cols = resize
    pixels = rows * cols
    if Image.MAX_IMAGE_PIXELS and pixels > Image.MAX_IMAGE_PIXELS:
        raise SizeLimitError(
            f"{origin}: --resize {rows}x{cols} makes images of {pixels:,} pixels, beyond "
            f"Pillow's decompression-bomb limit of {Image.MAX_IMAGE_PIXELS:,} pixels")
    check_memory(pixels * 4 * 2, f"an image resized to {rows}x{cols} (--resize)", origin)


def _check_size(image, origin):
    from PIL import Image

    pixels = image.width * image.height
    if Image.MAX_IMAGE_PIXELS and pixels > Image.MAX_IMAGE_PIXELS:
        raise SizeLimitError(
            f"{origin}: is {image.width}x{image.height} ({pixels:,} pixels), beyond Pillow's "
            f"decompression-bomb limit of {Image.MAX_IMAGE_PIXELS:,} pixels")
    check_memory(pixels * max(1, len(image.getbands())) * 4, f"a {image.width}x{image.height} image",
                 origin)


def _as_8bit(image, origin):
    """``image`` in mode L or RGB, refusing what that would change silently."""
    mode = image.mode
    if mode in (_GRAY, _COLOUR):
        if "transparency" in image.info:  # (a PNG's tRNS: one grey or colour is transparent)
            _refuse_transparent(image.convert("LA" if mode == _GRAY else "RGBA"), mode, origin)
        return image
    if mode == "1":
        return image.convert(_GRAY)
    if mode in ("YCbCr", "CMYK"):  # (colour in other terms; torchvision takes them as RGB too)
        return image.convert(_COLOUR)
    if mode in _PALETTE:
        image = image.convert("RGBA")
    if mode not in ("LA", "RGBA") + _PALETTE:
        raise SourceFormatError(
            f"{origin}: image mode {mode} is not 8-bit grey or colour (int8store stores "
            "8-bit pixels); convert it to L or RGB first"
        )
    _refuse_transparent(image, mode, origin)
    image = image.convert(_GRAY if mode == "LA" else _COLOUR)
    if mode in _PALETTE and _all_grey(image):
        # A GIF has no grey mode: Pillow reads one of fewer than 256 greys
        # as a palette of greys, stored in a third of colour's bytes.
        return image.getchannel("R")
    return image


def _refuse_transparent(image, mode, origin):
    """Refuse ``image`` (with an alpha channel) if a pixel is not opaque."""
    alpha = np.asarray(image.getchannel("A"))
    if alpha.size and alpha.min() < 255:
        raise SourceFormatError(
            f"{origin}: has transparent pixels (mode {mode}); int8store keeps grey or "
            "colour pixels only, so flatten the transparency first"
        )


def in_colour_by_header(data):
    """True or False where the header of the image file ``data`` says
    whether its pixels are colour; None where only its pixels can (a
    palette), or Pillow cannot tell."""
    from PIL import Image

    if _is_png(data):
        # (a PNG's colour type, at a fixed place: a set of small grey PNGs
        # is scanned for a colour one in a third less time than by Pillow)
        return _PNG_COLOUR.get(data[25])
    try:
        mode = Image.open(io.BytesIO(data), formats=RASTER_FORMATS).mode
    except Exception:  # noqa: BLE001 - decoding it says what is wrong, in its own words
        return None
    if mode in (_COLOUR, "RGBA", "YCbCr", "CMYK"):
        return True
    return False if mode in (_GRAY, "1", "LA") else None


def _all_grey(image):
    """Whether every pixel of the RGB ``image`` has equal red, green and blue."""
    pixels = np.asarray(image)
    return bool((pixels[..., 0] == pixels[..., 1]).all() and (pixels[..., 1] == pixels[..., 2]).all())
