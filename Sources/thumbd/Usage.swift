import ImagePipeline

#if canImport(Glibc)
  import Glibc
#endif

/// Help texts for every command.
enum Usage {
  static let version = "0.9.0"

  static let main = """
    thumbd: a thumbnail pipeline and daemon.

    Usage:
      thumbd thumbnail INPUT... --size WxH [options] --output DIR/|FILE|-
      thumbd warm INPUT... --size WxH [options] [serve options]
      thumbd desktop INPUT... [--flavors normal,large] [options]
      thumbd serve [--socket PATH] [--listen HOST:PORT] [options]
      thumbd sign PATH [--key HEX --salt HEX]...
      thumbd --help | --version

    Commands:
      thumbnail   Make thumbnails of image files, many in one process.
      warm        Fill the daemon's disk cache with what clients will ask for.
      desktop     Fill the desktop's thumbnail cache, which file managers read.
      serve       Serve thumbnails over HTTP/1.1 on a Unix socket (and TCP).
      sign        Sign an imgproxy-style path with HMAC-SHA256.

    Run 'thumbd COMMAND --help' for a command's options.
    """

  static let thumbnail = """
    thumbd thumbnail: make thumbnails of \(SourceFormat.readableList) files, and of videos,
    PDFs and SVGs.

    Usage:
      thumbd thumbnail INPUT... --size WxH [options] --output DIR/|FILE|-

    An INPUT is a file, a directory (walked, every depth, in name order; names
    starting with '.' and files that are not images are skipped; a link back to
    a directory above it is not followed) or '-' (a list of paths on standard
    input, one per line, or NUL-separated with -0). Everything after '--' is an
    INPUT, even a name starting with '-'. Names are bytes: a name that is not
    UTF-8 is read and written as it is, and shown with \\xNN for those bytes.

    --output is a directory when it ends with '/' or is one already: each input
    becomes a file there with its base name and its format's extension (.jpg,
    .png, .webp, .avif or .gif). Inputs that would share a name are taken in
    path order: the first keeps it, the others get a suffix made from their path
    (IMG_0001-5b873ffb.jpg), the same on every run. With --keep-paths the input
    tree is mirrored instead. Otherwise --output is one file for one input,
    and its extension names the format; '-' writes to standard output.
    Formats are recognised from their bytes, not names. Animations give their
    first frame. EXIF orientation (HEIF's own rotation and mirroring) is
    applied, and the box applies to the upright image. Videos give their frame
    10% in, made by thumbd-frame (installed beside thumbd) in a bubblewrap
    sandbox, turned as a player shows it.

    Options:
      --size WxH        Target box in points, e.g. 256x256. Use 256x0 or 0x256
                        to bound one side only. Required.
      --scale N         Device pixel ratio: the box in pixels is W*N x H*N.
                        Default 1.
      --fit MODE        contain (inside the box, default), cover (fill the box,
                        centre crop), fill (stretch to the box) or auto (cover
                        when source and box are both landscape or both
                        portrait, else contain).
      --format FMT      auto (PNG when the result has alpha, else JPEG; the
                        default), png, jpeg, webp, avif or gif. For an output
                        file, its extension decides; both must agree.
      --quality Q       JPEG, WebP and AVIF quality, 1-100. Default 80.
      --avif-speed N    AVIF encoder speed, 0 (slowest, smallest) to 9.
                        Default 8.
      --full-decode     Decode at full size: no JPEG DCT scaling, no WebP
                        scaled decoding, no HEIF embedded thumbnail (for
                        reference measurements).
      --upscale         Allow output larger than the source.
      --frames N        With WebP or GIF output, an animated GIF or WebP keeps
                        up to N frames, as an animation. Default 1 (a still).
      --options OPTS    imgproxy processing options, separated by /, e.g.
                        g:sm/rot:90/pd:8/bg:ffffff: gravity, crop, rotation,
                        flip, padding, background, enlarge, extend, blur,
                        sharpen, pixelate (docs/PROTOCOL.md, "Geometry and
                        filters"). Later flags override earlier ones.
      --colour MODE     srgb (convert through the embedded colour profile to
                        sRGB, output untagged; the default) or keep (pixels
                        as they are, the RGB profile copied into the output).
      --filter NAME     Final reduction kernel: lanczos3-area (the default:
                        Lanczos-3 blended with an area average), lanczos3
                        (sharpest, most ringing), catmull-rom or area
                        (softest).
      --accept-damaged  Keep damaged or truncated JPEGs (grey-padded) instead
                        of failing them.
      --max-pixels N    Refuse sources with more pixels. Default 100000000.
      --decode-timeout S
                        Give up on a decode after S seconds (decode_timeout).
                        Default 10; 0 for none.
      --jobs N          Worker threads. Default: the number of cores.
      -o, --output P    Output directory (DIR/, created if missing), one
                        output file, or - for standard output.
      --keep-paths      Mirror the input paths under the output directory
                        (photos/2019/a.jpg -> DIR/photos/2019/a.jpg).
      --skip-existing   Leave inputs whose output exists (resumes a run).
      -0, --null        The list read from '-' is NUL-separated (find -print0).
      -v, --verbose     Say what each input became.
      -q, --quiet       No progress line and no summary.
      -h, --help        Show this help.

    On a terminal a progress line shows the count, the rate and the time left.
    When more than one input was given or found (or with --verbose), a summary
    at the end says how many were made, failed (by kind) and skipped (existing,
    not images, duplicates, directory loops, links out of the tree), and the
    seconds taken.

    Each failed input prints one line on stderr: PATH: KIND: message.
    With --accept-damaged, a damaged input that was kept prints
    PATH: warning: damaged data accepted (N decoder warnings).
    Kinds: unsupported_format, corrupt, truncated, too_large, too_complex,
    decode_timeout, out_of_memory, io, invalid_spec, encoding_failed.

    Exit status: 0 all succeeded, 1 some input failed, 2 usage error (inputs that hold
    no images included).
    """
}

/// Writes a line to standard error, in one write(2), so lines from worker threads never
/// interleave.
func printError(_ text: String) { writeError(text + "\n") }
