import Foundation

/// Large JPEGs of the shapes that once made a decode hold the whole image, written by tools
/// from Debian's packages (Python's PIL for CMYK, cjpeg for arithmetic coding), fed row by row
/// so that the test process never holds them.
enum LargeJPEG {
  /// A progressive CMYK (Adobe) JPEG of `size` x `size` gradients, by PIL.
  static func cmykProgressive(_ path: String, size: Int) throws {
    try run(
      "/usr/bin/python3",
      [
        "-c",
        """
        import sys
        from PIL import Image
        size = int(sys.argv[2])
        grey = Image.linear_gradient("L").resize((size, size))
        cmyk = Image.merge("CMYK", (grey, grey.rotate(90), grey.rotate(180), grey.rotate(270)))
        cmyk.save(sys.argv[1], "JPEG", progressive=True, quality=85)
        """,
        path, String(size),
      ])
  }

  /// An arithmetic-coded progressive grey JPEG of `size` x `size` stripes, by cjpeg from a PGM
  /// that Python streams into it.
  static func arithmeticProgressiveGrey(_ path: String, size: Int) throws {
    let script = """
      import sys
      w = h = int(sys.argv[1])
      out = sys.stdout.buffer
      out.write(b"P5 %d %d 255\\n" % (w, h))
      rows = [bytes(x * 255 // w for x in range(w)), bytes(255 - x * 255 // w for x in range(w))]
      for y in range(h):
          out.write(rows[y // 64 % 2])
      """
    try run(
      "/bin/sh",
      [
        "-c",
        "/usr/bin/python3 -c \"$0\" \"$1\" | cjpeg -arithmetic -progressive -grayscale > \"$2\"",
        script, String(size), path,
      ])
  }

  /// A `size` x `size` colour JPEG by PIL, flat grey above and noise below: nearly all its
  /// entropy-coded bytes are in the lower half.
  static func flatAboveNoise(_ path: String, size: Int) throws {
    try run(
      "/usr/bin/python3",
      [
        "-c",
        """
        import sys
        from PIL import Image
        size = int(sys.argv[2])
        noise = [Image.effect_noise((size, size // 2), 60 + 10 * i) for i in range(3)]
        picture = Image.new("RGB", (size, size), (128, 128, 128))
        picture.paste(Image.merge("RGB", noise), (0, size // 2))
        picture.save(sys.argv[1], "JPEG", quality=90)
        """,
        path, String(size),
      ])
  }

  private static func run(_ executable: String, _ arguments: [String]) throws {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    try process.run()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else { throw POSIXError(.EIO) }
  }
}
