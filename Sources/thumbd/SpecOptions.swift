import ImagePipeline
import ThumbServer

/// The thumbnail options shared by `thumbnail` and `warm`: --size, --scale, --fit, --format,
/// --quality, --upscale, --frames, --colour and --options.
enum SpecOptions {
  /// Applies `argument` to `spec` if it is one of these options; false when it is not.
  static func parse(
    _ argument: ArgumentCursor.Argument, _ cursor: inout ArgumentCursor,
    into spec: inout ThumbnailSpec
  ) throws(ThumbnailCommand.UsageError) -> Bool {
    switch argument.name {
    case "--size":
      let value = try cursor.value(for: argument)
      let parts = value.split(separator: "x", omittingEmptySubsequences: false)
      guard parts.count == 2, let w = Int(parts[0]), let h = Int(parts[1]) else {
        throw .init(message: "--size expects WxH, e.g. 256x256, got '\(value)'")
      }
      spec.width = w
      spec.height = h
    case "--scale":
      let value = try cursor.value(for: argument)
      guard let scale = Double(value) else {
        throw .init(message: "--scale expects a number, got '\(value)'")
      }
      spec.scale = scale
    case "--fit":
      spec.fit = try cursor.choice(for: argument)
    case "--format":
      spec.format = try cursor.choice(for: argument)
    case "--quality":
      spec.quality = try cursor.integer(for: argument, in: 1...100)
    case "--upscale":
      spec.allowUpscale = true
    case "--frames":
      spec.maxFrames = try cursor.integer(for: argument, in: 1...ThumbnailSpec.maxAnimationFrames)
    case "--colour":
      spec.colour = try cursor.choice(for: argument)
    case "--options":
      let value = try cursor.value(for: argument)
      do {
        try spec.apply(options: value)
      } catch {
        throw .init(message: "--options: \(error.message)")
      }
    default:
      return false
    }
    return true
  }
}
