import Foundation

/// A picture (each frame of an animation) as Pillow reads it: an independent reader of what
/// thumbd writes (giflib writes a GIF, so giflib's own reader would share its mistakes), and
/// of sources Debian's libraries read otherwise (Pillow's wheels carry newer ones).
struct PillowImage {
  let width: Int
  let height: Int
  /// Each frame's delay in milliseconds, as Pillow reports it.
  let durations: [Int]
  /// The NETSCAPE block's repeat count (0: for ever); nil when there is none (played once).
  let loop: Int?
  /// Each frame as Pillow composes it, RGBA.
  let frames: [[UInt8]]

  /// The picture in `data`, or nil when Pillow cannot read it.
  static func read(_ data: [UInt8]) -> PillowImage? {
    let directory = FileManager.default.temporaryDirectory
      .appendingPathComponent("thumbd-pillow-\(UUID().uuidString)")
    try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    let input = directory.appendingPathComponent("in")
    let pixels = directory.appendingPathComponent("frames.rgba")
    guard (try? Data(data).write(to: input)) != nil else { return nil }
    let script = """
      import json, sys
      from PIL import Image, ImageSequence
      image = Image.open(sys.argv[1])
      durations = []
      with open(sys.argv[2], "wb") as out:
          for frame in ImageSequence.Iterator(image):
              durations.append(frame.info.get("duration", 0))
              out.write(frame.convert("RGBA").tobytes())
      print(json.dumps({"width": image.width, "height": image.height,
                        "durations": durations, "loop": image.info.get("loop")}))
      """
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
    process.arguments = ["-c", script, input.path, pixels.path]
    let output = Pipe()
    process.standardOutput = output
    process.standardError = FileHandle.nullDevice
    guard (try? process.run()) != nil else { return nil }
    let text = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    guard process.terminationStatus == 0,
      let object = try? JSONSerialization.jsonObject(with: text) as? [String: Any],
      let width = object["width"] as? Int, let height = object["height"] as? Int,
      let durations = object["durations"] as? [Int],
      let bytes = try? Data(contentsOf: pixels)
    else { return nil }
    let size = width * height * 4
    guard size > 0, bytes.count == size * durations.count else { return nil }
    let frames = (0..<durations.count).map { Array(bytes[($0 * size)..<(($0 + 1) * size)]) }
    return PillowImage(
      width: width, height: height, durations: durations, loop: object["loop"] as? Int,
      frames: frames)
  }
}
