"""What the benchmarks measure thumbnails against: the corpus's files by kind, and an
area-average reference (Pillow's full decode, upright by EXIF, in sRGB when the file carries a
profile, reduced with Image.BOX, over mid-grey), with PSNR over RGB."""
import io
import math
import os

from PIL import Image, ImageChops, ImageCms, ImageOps, ImageStat

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.environ.get("THUMBD_CORPUS", os.path.join(HERE, "..", "..", "shared", "corpus"))
SRGB = ImageCms.createProfile("sRGB")
EXTENSIONS = (".jpg", ".jpeg", ".png", ".gif")


def corpus_files(kinds):
    """The corpus's decodable JPEG, PNG and GIF files of these kinds (MANIFEST's column 4)."""
    files = []
    for manifest in ("MANIFEST.tsv", "MANIFEST-formats.tsv"):
        with open(os.path.join(CORPUS, manifest)) as f:
            next(f)
            for line in f:
                fields = line.split("\t")
                if (fields[4] == "decode-ok" and fields[3] in kinds
                        and fields[0].lower().endswith(EXTENSIONS)):
                    files.append(os.path.join(CORPUS, fields[0]))
    return files


def flatten(image):
    """The picture over mid-grey, as RGB."""
    image = image.convert("RGBA")
    grey = Image.new("RGBA", image.size, (128, 128, 128, 255))
    return Image.alpha_composite(grey, image).convert("RGB")


def psnr(a, b):
    """PSNR in dB over RGB (99 for identical pictures)."""
    difference = ImageChops.difference(a, b)
    mse = sum(value * value for value in ImageStat.Stat(difference).rms) / 3
    return 99.0 if mse == 0 else 10 * math.log10(255 * 255 / mse)


def reference(path, size):
    """The area-average reference of the file at `path`, `size` pixels."""
    source = Image.open(path)
    icc = source.info.get("icc_profile")
    upright = ImageOps.exif_transpose(source)
    if upright.mode not in ("RGB", "RGBA"):
        upright = upright.convert("RGBA")
    if icc:
        try:
            upright = ImageCms.profileToProfile(
                upright.convert("RGB"), ImageCms.ImageCmsProfile(io.BytesIO(icc)), SRGB,
                renderingIntent=ImageCms.Intent.RELATIVE_COLORIMETRIC, outputMode="RGB")
        except (ImageCms.PyCMSError, OSError, ValueError):
            pass
    return flatten(upright.resize(size, Image.BOX))
