import Foundation
import Testing
import ThumbSystem

@testable import ImagePipeline
@testable import TestSupport

/// imgproxy's geometry (`Geometry`): gravity, crop, rotation, mirroring, extending, padding,
/// background and smart crop, checked pixel by pixel on pictures whose answer is known.
@Suite("Geometry options")
struct GeometryOptionsTests {
  let thumbnailer = Thumbnailer()

  /// Three vertical bands, red, green and blue, `width` x `height`.
  static func bands(width: Int = 300, height: Int = 100) throws -> [UInt8] {
    var pixels: [UInt8] = []
    for _ in 0..<height {
      for x in 0..<width {
        pixels += x < width / 3 ? [255, 0, 0] : x < 2 * width / 3 ? [0, 255, 0] : [0, 0, 255]
      }
    }
    return try ImageEncoder.png(Bitmap(pixels: pixels, width: width, height: height, channels: 3))
  }

  func picture(_ source: [UInt8], _ spec: ThumbnailSpec) throws -> Bitmap {
    var spec = spec
    spec.format = .png
    let made = try thumbnailer.thumbnail(.bytes(source), spec: ValidSpec(spec))
    return try thumbnailer.decodeFullResolution(.bytes(made.data))
  }

  func picture(_ path: String, _ spec: ThumbnailSpec) throws -> Bitmap {
    var spec = spec
    spec.format = .png
    let made = try thumbnailer.thumbnail(.path(path), spec: ValidSpec(spec))
    return try thumbnailer.decodeFullResolution(.bytes(made.data))
  }

  /// The pixel at (x, y).
  static func pixel(_ image: Bitmap, _ x: Int, _ y: Int) -> [UInt8] {
    let at = (y * image.width + x) * image.channels
    return Array(image.pixels[at..<at + image.channels])
  }

  /// Which band colour the picture shows most: 0 red, 1 green, 2 blue.
  static func dominant(_ image: Bitmap) -> Int {
    var sums = [0, 0, 0]
    for i in stride(from: 0, to: image.pixels.count, by: image.channels) {
      for c in 0..<3 { sums[c] += Int(image.pixels[i + c]) }
    }
    return sums.firstIndex(of: sums.max()!)!
  }

  /// Turned a quarter clockwise, written independently of the codecs.
  static func quarterTurn(_ image: Bitmap) -> Bitmap {
    var out = Bitmap(
      pixels: [UInt8](repeating: 0, count: image.pixels.count), width: image.height,
      height: image.width, channels: image.channels)
    for y in 0..<image.height {
      for x in 0..<image.width {
        let (tx, ty) = (image.height - 1 - y, x)
        for c in 0..<image.channels {
          out.pixels[(ty * out.width + tx) * out.channels + c] =
            image.pixels[(y * image.width + x) * image.channels + c]
        }
      }
    }
    return out
  }

  /// Mirrored left to right.
  static func mirrored(_ image: Bitmap) -> Bitmap {
    var out = image
    for y in 0..<image.height {
      for x in 0..<image.width {
        for c in 0..<image.channels {
          out.pixels[(y * image.width + x) * image.channels + c] =
            image.pixels[(y * image.width + image.width - 1 - x) * image.channels + c]
        }
      }
    }
    return out
  }

  static func flipped(_ image: Bitmap) -> Bitmap {
    quarterTurn(quarterTurn(mirrored(image)))
  }

  @Test(
    "rotation and mirroring after every EXIF orientation are exactly the plain thumbnail turned",
    arguments: 1...8)
  func rotationAndMirroring(orientation: Int) throws {
    let path = Corpus.path("exif-orientation/recurser/Landscape_\(orientation).jpg")
    let box = ThumbnailSpec(width: 120, height: 120)
    let plain = try picture(path, box)
    for rotation in [0, 90, 180, 270] {
      for (horizontal, vertical) in [(false, false), (true, false), (false, true), (true, true)] {
        var spec = box
        spec.geometry.rotation = rotation
        (spec.geometry.flipHorizontal, spec.geometry.flipVertical) = (horizontal, vertical)
        var expected = plain
        for _ in 0..<rotation / 90 { expected = Self.quarterTurn(expected) }
        if horizontal { expected = Self.mirrored(expected) }
        if vertical { expected = Self.flipped(expected) }
        let same = try picture(path, spec) == expected
        #expect(
          same,
          "orientation \(orientation), rotation \(rotation), flips \(horizontal) \(vertical)")
      }
    }
  }

  @Test("a cover crop's window sits where the gravity says, offsets and focus points included")
  func gravity() throws {
    let source = try Self.bands()
    func shown(_ gravity: Gravity, rotation: Int = 0) throws -> Int {
      var spec = ThumbnailSpec(width: 100, height: 100, fit: .cover)
      spec.geometry.gravity = gravity
      spec.geometry.rotation = rotation
      return Self.dominant(try picture(source, spec))
    }
    #expect(try shown(.centre) == 1)
    #expect(try shown(Gravity(.west)) == 0)
    #expect(try shown(Gravity(.southWest)) == 0)
    #expect(try shown(Gravity(.east)) == 2)
    #expect(try shown(Gravity(.northEast)) == 2)
    #expect(try shown(Gravity(.north)) == 1)
    #expect(try shown(Gravity(.west, offsetX: 100)) == 1, "offset inward from the west edge")
    #expect(try shown(Gravity(.east, offsetX: 100)) == 1)
    #expect(try shown(Gravity(.centre, offsetX: -100)) == 0)
    #expect(try shown(Gravity(.west, offsetX: -500)) == 0, "an offset never leaves the image")
    #expect(try shown(Gravity(.west, offsetX: 0.34)) == 1, "below 1: a fraction of the width")
    #expect(try shown(Gravity(.east, offsetX: 0.34)) == 1)
    #expect(try shown(Gravity(.focus, focusX: 0.9, focusY: 0.5)) == 2)
    #expect(try shown(Gravity(.focus, focusX: 0.1, focusY: 0.5)) == 0)
    // Turned a quarter clockwise the red band is on top: gravity is in displayed terms.
    #expect(try shown(Gravity(.north), rotation: 90) == 0)
    #expect(try shown(Gravity(.south), rotation: 90) == 2)
    #expect(try shown(Gravity(.north), rotation: 270) == 2)
  }

  @Test("a crop is cut from the displayed source before resizing, in pixels or fractions")
  func crop() throws {
    let source = try Self.bands()
    func cut(_ width: Double, _ height: Double, _ gravity: Gravity?) throws -> Bitmap {
      var spec = ThumbnailSpec(width: 400, height: 400)
      (spec.geometry.cropWidth, spec.geometry.cropHeight) = (width, height)
      spec.geometry.cropGravity = gravity
      return try picture(source, spec)
    }
    let east = try cut(100, 100, Gravity(.east))
    #expect(east.width == 100 && east.height == 100 && Self.dominant(east) == 2)
    #expect(Self.pixel(east, 0, 50) == [0, 0, 255], "nothing of the green band")
    let west = try cut(0.3, 0, Gravity(.west))
    #expect(west.width == 90 && west.height == 100 && Self.dominant(west) == 0)
    let outside = try cut(5000, 5000, nil)
    #expect(outside.width == 300 && outside.height == 100, "a crop past the edges is the image")
    let focus = try cut(50, 50, Gravity(.focus, focusX: 1, focusY: 1))
    #expect(Self.pixel(focus, 49, 49) == [0, 0, 255])
  }

  @Test("extend places the result on a box-sized canvas of the background, or transparent")
  func extend() throws {
    let source = try Self.bands()
    var spec = ThumbnailSpec(width: 600, height: 300)
    spec.geometry.extend = Gravity(.north)
    spec.geometry.background = RGBColour(red: 10, green: 20, blue: 30)
    let filled = try picture(source, spec)
    #expect(filled.width == 600 && filled.height == 300 && filled.channels == 3)
    #expect(Self.pixel(filled, 300, 50) == [0, 255, 0], "the image, at the top centre")
    #expect(
      Self.pixel(filled, 300, 150) == [10, 20, 30] && Self.pixel(filled, 0, 0) == [10, 20, 30])
    spec.geometry.background = nil
    spec.geometry.extend = Gravity(.southEast)
    let clear = try picture(source, spec)
    #expect(clear.channels == 4 && Self.pixel(clear, 0, 0)[3] == 0)
    #expect(Self.pixel(clear, 599, 299) == [0, 0, 255, 255])
    #expect(Self.pixel(clear, 299, 199)[3] == 0 && Self.pixel(clear, 300, 200)[3] == 255)
  }

  @Test("padding adds exactly its pixels on each side, at the device scale")
  func padding() throws {
    let source = try Self.bands()
    var spec = ThumbnailSpec(width: 150, height: 150, scale: 2)
    spec.geometry.padding = Padding(top: 1, right: 2, bottom: 3, left: 4)
    spec.geometry.background = RGBColour(red: 255, green: 255, blue: 0)
    let padded = try picture(source, spec)
    #expect(padded.width == 300 + 12 && padded.height == 100 + 8)
    #expect(Self.pixel(padded, 7, 1) == [255, 255, 0] && Self.pixel(padded, 8, 2) == [255, 0, 0])
    #expect(
      Self.pixel(padded, 307, 101) == [0, 0, 255] && Self.pixel(padded, 308, 101) == [255, 255, 0])
    #expect(Self.pixel(padded, 307, 102) == [255, 255, 0])
  }

  @Test("a background flattens alpha onto itself")
  func flatten() throws {
    let pixels = [UInt8]((0..<64).flatMap { _ in [200, 0, 0, 128] as [UInt8] })
    let source = try ImageEncoder.png(Bitmap(pixels: pixels, width: 8, height: 8, channels: 4))
    var spec = ThumbnailSpec(width: 8, height: 8)
    spec.geometry.background = RGBColour(red: 0, green: 0, blue: 255)
    let flat = try picture(source, spec)
    #expect(flat.channels == 3)
    // 200 * 128/255 and 255 * 127/255, rounded.
    #expect(Self.pixel(flat, 4, 4) == [100, 0, 127])
  }

  @Test("rt:auto covers when source and box share an orientation, else contains")
  func autoFit() throws {
    let source = try Self.bands()
    let wide = try thumbnailer.thumbnail(
      .bytes(source), spec: ValidSpec(ThumbnailSpec(width: 100, height: 50, fit: .auto)))
    #expect(wide.width == 100 && wide.height == 50)
    let tall = try thumbnailer.thumbnail(
      .bytes(source), spec: ValidSpec(ThumbnailSpec(width: 50, height: 100, fit: .auto)))
    #expect(tall.width == 50 && tall.height == 17)
  }

  @Test("smart crop keeps the detailed, skin-toned subject a centre crop cuts off")
  func smart() throws {
    // Flat grey, 400x100, with a textured skin-toned square near the right edge.
    var pixels: [UInt8] = []
    for y in 0..<100 {
      for x in 0..<400 {
        if (310..<380).contains(x) && (15..<85).contains(y) {
          pixels += (x / 4 + y / 4) % 2 == 0 ? [224, 172, 140] : [190, 130, 100]
        } else {
          pixels += [128, 128, 128]
        }
      }
    }
    let source = try ImageEncoder.png(Bitmap(pixels: pixels, width: 400, height: 100, channels: 3))
    var spec = ThumbnailSpec(width: 100, height: 100, fit: .cover)
    spec.geometry.gravity = Gravity(.smart)
    let chosen = try picture(source, spec)
    #expect(chosen.width == 100 && chosen.height == 100)
    let subject = (0..<100).filter { Self.pixel(chosen, $0, 50) != [128, 128, 128] }.count
    #expect(subject >= 60, "the subject is in the window (\(subject) of its 70 columns)")
    let again = try picture(source, spec) == chosen
    #expect(again, "the same window every time")
    let centre = try picture(source, ThumbnailSpec(width: 100, height: 100, fit: .cover))
    #expect((0..<100).allSatisfy { Self.pixel(centre, $0, 50) == [128, 128, 128] })
  }

  @Test(
    "a smart crop (c:W:H:sm) is placed on the subject of the whole picture, the box's crop with it")
  func smartSourceCrop() throws {
    // Flat grey, 400x300, with a textured skin-toned square near the top-left corner.
    var pixels: [UInt8] = []
    for y in 0..<300 {
      for x in 0..<400 {
        if (30..<100).contains(x) && (20..<90).contains(y) {
          pixels += (x / 4 + y / 4) % 2 == 0 ? [224, 172, 140] : [190, 130, 100]
        } else {
          pixels += [128, 128, 128]
        }
      }
    }
    let source = try ImageEncoder.png(Bitmap(pixels: pixels, width: 400, height: 300, channels: 3))
    func subject(_ image: Bitmap) -> Int {
      var count = 0
      for y in 0..<image.height {
        for x in 0..<image.width where Self.pixel(image, x, y) != [128, 128, 128] { count += 1 }
      }
      return count
    }
    // The whole crop shown (contain), at half size: 60x60 of its 70x70 subject, scaled.
    var spec = ThumbnailSpec(width: 60, height: 60)
    spec.geometry.cropWidth = 120
    spec.geometry.cropHeight = 120
    spec.geometry.cropGravity = Gravity(.smart)
    let contained = try picture(source, spec)
    #expect(contained.width == 60 && contained.height == 60)
    #expect(subject(contained) >= 35 * 35 * 3 / 4, "\(subject(contained)) subject pixels")
    // A cover box inside a wider crop (at 0.8, the subject 56x56): the window shown is on
    // the subject too.
    spec = ThumbnailSpec(width: 80, height: 80, fit: .cover)
    spec.geometry.cropWidth = 240
    spec.geometry.cropHeight = 100
    spec.geometry.cropGravity = Gravity(.smart)
    let covered = try picture(source, spec)
    #expect(covered.width == 80 && covered.height == 80)
    #expect(subject(covered) >= 50 * 50, "\(subject(covered)) subject pixels")
    #expect(try picture(source, spec) == covered, "the same window every time")
    // `g:sm` places a crop that names no gravity of its own, as imgproxy does.
    spec.geometry.cropGravity = nil
    spec.geometry.gravity = Gravity(.smart)
    #expect(try picture(source, spec) == covered)
    // A centred crop of the same size misses the subject altogether.
    spec.geometry.gravity = .centre
    #expect(subject(try picture(source, spec)) == 0)
  }

  @Test("the size a placeholder announces is the size made, whatever the geometry")
  func announcedSize() throws {
    var random = SystemRandomNumberGenerator()
    var maker = Thumbnailer()
    maker.makesPlaceholders = true
    let kinds = Gravity.Kind.allCases.filter { $0 != .smart && $0 != .focus }
    for _ in 0..<60 {
      let (width, height) = (
        Int.random(in: 3...90, using: &random), Int.random(in: 3...90, using: &random)
      )
      let pixels = [UInt8](repeating: 90, count: width * height * 3)
      let source = try ImageEncoder.png(
        Bitmap(pixels: pixels, width: width, height: height, channels: 3))
      var spec = ThumbnailSpec(
        width: Int.random(in: 0...120, using: &random),
        height: Int.random(in: 1...120, using: &random),
        scale: [1, 1.5, 2].randomElement(using: &random)!,
        fit: FitMode.allCases.randomElement(using: &random)!,
        allowUpscale: Bool.random(using: &random))
      spec.geometry.gravity = Gravity([.smart, .centre, .north].randomElement(using: &random)!)
      spec.geometry.rotation = [0, 90, 180, 270].randomElement(using: &random)!
      spec.geometry.flipVertical = Bool.random(using: &random)
      if Bool.random(using: &random) {
        spec.geometry.cropWidth = [0, 0.5, 10, 200].randomElement(using: &random)!
        spec.geometry.cropHeight = [0, 0.3, 7, 500].randomElement(using: &random)!
      }
      if Bool.random(using: &random) {
        spec.geometry.extend = Gravity(kinds.randomElement(using: &random)!)
      }
      spec.geometry.padding = Padding(
        top: Int.random(in: 0...3, using: &random), left: Int.random(in: 0...3, using: &random))
      let made = try maker.thumbnail(.bytes(source), spec: ValidSpec(spec))
      let announced = try #require(made.placeholder?.outputSize(for: spec))
      #expect(
        announced.width == made.width && announced.height == made.height,
        "\(width)x\(height) \(spec)")
    }
  }

  @Test("hostile geometry is refused before any work")
  func hostile() {
    func refused(_ change: (inout Geometry) -> Void) -> Bool {
      var spec = ThumbnailSpec(width: 64, height: 64)
      change(&spec.geometry)
      return (try? ValidSpec(spec)) == nil
    }
    #expect(refused { $0.padding.top = 1 << 31 })
    #expect(refused { $0.padding.left = -1 })
    #expect(refused { $0.gravity = Gravity(.focus, focusX: .nan, focusY: 0.5) })
    #expect(refused { $0.gravity = Gravity(.north, offsetX: .infinity) })
    #expect(refused { $0.extend = Gravity(.smart) })
    #expect(refused { $0.cropWidth = -1 })
    #expect(refused { $0.cropHeight = 1e12 })
    #expect(refused { $0.rotation = 45 })
    #expect(!refused { $0.padding = Padding(top: 16_384) })
  }

  @Test("a canvas over the pixel limit is refused, not allocated")
  func canvasLimit() throws {
    var limited = Thumbnailer()
    limited.limits.maxPixels = 100_000
    var spec = ThumbnailSpec(width: 64, height: 64)
    spec.geometry.padding = Padding(top: 16_000, right: 16_000)
    #expect(throws: ThumbnailError.self) {
      try limited.thumbnail(.bytes(try Self.bands()), spec: ValidSpec(spec))
    }
  }

  @Test("disk keys: every geometry its own, the default keeping the key it had")
  func diskKeys() {
    let url = "https://example.com/a.jpg"
    func key(_ change: (inout Geometry) -> Void) -> String {
      var spec = ThumbnailSpec(width: 64, height: 64, fit: .cover)
      change(&spec.geometry)
      return ThumbnailDiskFormat.key(
        for: ImageRequest(url: url, spec: .known(spec)), filter: .lanczos3Area)
    }
    let plain = key { _ in }
    #expect(plain.hasPrefix("thumb-v4|") && plain.hasSuffix("|srgb|" + url))
    let changes: [(inout Geometry) -> Void] = [
      { $0.gravity = Gravity(.north) }, { $0.gravity = Gravity(.north, offsetX: 1) },
      { $0.gravity = Gravity(.smart) }, { $0.gravity = Gravity(.focus, focusX: 0.2) },
      { $0.cropWidth = 10 }, { $0.cropHeight = 10 },
      {
        $0.cropWidth = 10
        $0.cropGravity = Gravity(.east)
      },
      { $0.rotation = 90 }, { $0.flipHorizontal = true }, { $0.flipVertical = true },
      { $0.extend = .centre }, { $0.extend = Gravity(.south) }, { $0.padding.left = 1 },
      { $0.padding.right = 1 }, { $0.background = RGBColour(red: 0, green: 0, blue: 0) },
    ]
    let keys = changes.map { key($0) }
    #expect(Set(keys + [plain]).count == changes.count + 1, "\(keys)")
    #expect(keys.allSatisfy { $0.hasPrefix("thumb-v5|") && $0.hasSuffix("|" + url) })
  }

  /// A gaussian blur written directly (two dimensions at once, doubles, clamped edges, colour
  /// weighted by alpha), with the kernel's rule: it ends below 0.2 of its peak.
  static func referenceBlur(_ image: Bitmap, sigma: Double) -> Bitmap {
    var radius = 0
    while exp(-Double((radius + 1) * (radius + 1)) / (2 * sigma * sigma)) >= 0.2 { radius += 1 }
    let weights = (-radius...radius).map { exp(-Double($0 * $0) / (2 * sigma * sigma)) }
    let total = weights.reduce(0, +)
    var out = image
    let channels = image.channels
    for y in 0..<image.height {
      for x in 0..<image.width {
        var sums = [Double](repeating: 0, count: channels)
        for dy in -radius...radius {
          for dx in -radius...radius {
            let sx = min(max(x + dx, 0), image.width - 1)
            let sy = min(max(y + dy, 0), image.height - 1)
            let w = weights[dx + radius] * weights[dy + radius] / (total * total)
            let at = (sy * image.width + sx) * channels
            let alpha = channels == 4 ? Double(image.pixels[at + 3]) / 255 : 1
            for c in 0..<channels {
              sums[c] += w * Double(image.pixels[at + c]) * (c == 3 ? 1 : alpha)
            }
          }
        }
        let alpha = channels == 4 ? sums[3] / 255 : 1
        for c in 0..<channels {
          let value = c == 3 ? sums[3] : alpha > 0 ? sums[c] / alpha : 0
          out.pixels[(y * image.width + x) * channels + c] = UInt8(
            min(255, max(0, value.rounded())))
        }
      }
    }
    return out
  }

  @Test("blur is a gaussian within a level of one written directly, alpha and edges included")
  func blur() throws {
    var random = SeededRandom(seed: 7)
    for channels in [3, 4] {
      let pixels = (0..<(37 * 29 * channels)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
      let bitmap = Bitmap(pixels: pixels, width: 37, height: 29, channels: channels)
      let source = try ImageEncoder.png(bitmap)
      for sigma in [0.5, 1.3, 4.0] {
        var spec = ThumbnailSpec(width: 37, height: 29)
        spec.filters.blur = sigma
        let made = try picture(source, spec)
        let expected = Self.referenceBlur(bitmap, sigma: sigma)
        #expect(made.width == 37 && made.channels == channels)
        let worst = ImageMetrics.sampleDifference(made, expected).worst
        #expect(worst <= 1, "channels \(channels), sigma \(sigma): off by \(worst)")
      }
    }
  }

  @Test("sharpening steepens an edge and leaves flat areas alone; pixelate averages blocks")
  func sharpenAndPixelate() throws {
    var pixels: [UInt8] = []
    for _ in 0..<40 {
      for x in 0..<40 { pixels += x < 20 ? [90, 90, 90] : [160, 160, 160] }
    }
    let source = try ImageEncoder.png(Bitmap(pixels: pixels, width: 40, height: 40, channels: 3))
    var spec = ThumbnailSpec(width: 40, height: 40)
    spec.filters.sharpen = 2
    let sharp = try picture(source, spec)
    #expect(Self.pixel(sharp, 18, 20)[0] < 90 && Self.pixel(sharp, 21, 20)[0] > 160, "overshoot")
    #expect(
      Self.pixel(sharp, 2, 20) == [90, 90, 90] && Self.pixel(sharp, 37, 20) == [160, 160, 160])
    spec.filters = Filters()
    spec.filters.pixelate = 8
    let blocks = try picture(source, spec)
    // The block over columns 16-23 averages four columns of each side.
    #expect(
      Self.pixel(blocks, 16, 3) == [125, 125, 125] && Self.pixel(blocks, 23, 39) == [125, 125, 125])
    #expect(
      Self.pixel(blocks, 15, 3) == [90, 90, 90] && Self.pixel(blocks, 24, 3) == [160, 160, 160])
  }

  @Test("filters run on the window before extending: the canvas stays the background")
  func filtersBeforeCanvas() throws {
    var spec = ThumbnailSpec(width: 600, height: 300)
    spec.geometry.extend = .centre
    spec.geometry.background = RGBColour(red: 0, green: 0, blue: 0)
    spec.filters.blur = 5
    let made = try picture(try Self.bands(), spec)
    #expect(Self.pixel(made, 0, 0) == [0, 0, 0] && Self.pixel(made, 150, 99) == [0, 0, 0])
    #expect(Self.pixel(made, 150, 100) == [255, 0, 0], "the window's edge clamps, never blends")
  }

  @Test("hostile filters are refused before any work")
  func hostileFilters() {
    func refused(_ change: (inout Filters) -> Void, scale: Double = 1) -> Bool {
      var spec = ThumbnailSpec(width: 64, height: 64, scale: scale)
      change(&spec.filters)
      return (try? ValidSpec(spec)) == nil
    }
    #expect(refused { $0.blur = 1e9 })
    #expect(refused { $0.sharpen = .nan })
    #expect(refused { $0.blur = -1 })
    #expect(refused({ $0.blur = 60 }, scale: 2), "the sigma is in points: 120 pixels")
    #expect(refused { $0.pixelate = -1 })
    #expect(!refused { $0.pixelate = 0 })
    #expect(!refused { $0.blur = 100 })
  }

  /// A watermark file: `width` x `height` of `pixel` (RGBA).
  static func watermark(_ pixel: [UInt8], width: Int, height: Int) throws -> Watermark {
    let path = FileManager.default.temporaryDirectory
      .appendingPathComponent("thumbd-watermark-\(UUID().uuidString).png").path
    let pixels = (0..<width * height).flatMap { _ in pixel }
    try Data(
      try ImageEncoder.png(Bitmap(pixels: pixels, width: width, height: height, channels: 4))
    )
    .write(to: URL(fileURLWithPath: path))
    defer { try? FileManager.default.removeItem(atPath: path) }
    return try Watermark(name: "mark", contentsOf: path)
  }

  /// A flat blue picture, `width` x `height`.
  static func blue(width: Int, height: Int) throws -> [UInt8] {
    let pixels = (0..<width * height).flatMap { _ in [0, 0, 255] as [UInt8] }
    return try ImageEncoder.png(Bitmap(pixels: pixels, width: width, height: height, channels: 3))
  }

  @Test("a watermark lies where its position says, at its opacity, scaled and tiled as asked")
  func watermarks() throws {
    let red = try Self.watermark([255, 0, 0, 255], width: 10, height: 10)
    let source = try Self.blue(width: 100, height: 50)
    var spec = ThumbnailSpec(width: 100, height: 50)
    spec.watermark = WatermarkPlacement(
      image: red, opacity: 0.5, position: Gravity(.southEast, offsetX: 5, offsetY: 5))
    let marked = try picture(source, spec)
    #expect(Self.pixel(marked, 90, 40) == [128, 0, 128], "half red over blue: (85...94, 35...44)")
    #expect(
      Self.pixel(marked, 85, 35) == [128, 0, 128] && Self.pixel(marked, 84, 35) == [0, 0, 255])
    #expect(
      Self.pixel(marked, 95, 45) == [0, 0, 255] && Self.pixel(marked, 94, 44) == [128, 0, 128])
    spec.watermark = WatermarkPlacement(image: red, opacity: 1, position: .centre, scale: 0.5)
    let scaled = try picture(source, spec)
    let covered = (0..<100).filter { Self.pixel(scaled, $0, 25) == [255, 0, 0] }
    #expect(covered == Array(25..<75), "half the width, centred")
    spec.watermark = WatermarkPlacement(
      image: red, opacity: 1, position: Gravity(.centre, offsetX: 10, offsetY: 15), replicate: true)
    let tiled = try picture(source, spec)
    #expect(Self.pixel(tiled, 0, 0) == [255, 0, 0] && Self.pixel(tiled, 10, 0) == [0, 0, 255])
    #expect(Self.pixel(tiled, 20, 25) == [255, 0, 0] && Self.pixel(tiled, 20, 12) == [0, 0, 255])
    let clear = try Self.watermark([255, 0, 0, 0], width: 10, height: 10)
    spec.watermark = WatermarkPlacement(image: clear, opacity: 1)
    let untouched = try picture(source, spec)
    #expect((0..<100).allSatisfy { Self.pixel(untouched, $0, 25) == [0, 0, 255] })
    var other = spec
    other.watermark?.opacity = 0.4
    #expect(other != spec)
    let key = { (spec: ThumbnailSpec) in
      ThumbnailDiskFormat.key(
        for: ImageRequest(url: "file:///a.png", spec: .known(spec)), filter: .area)
    }
    #expect(key(other) != key(spec) && key(spec).contains("wm=mark@"))
  }

  @Test("a larger watermark shrinks to fit, and bad placements are refused")
  func watermarkBounds() throws {
    let large = try Self.watermark([0, 255, 0, 255], width: 400, height: 40)
    var spec = ThumbnailSpec(width: 100, height: 50)
    spec.watermark = WatermarkPlacement(image: large, opacity: 1)
    let fitted = try picture(try Self.blue(width: 100, height: 50), spec)
    #expect(Self.pixel(fitted, 0, 25) == [0, 255, 0] && Self.pixel(fitted, 99, 25) == [0, 255, 0])
    #expect(Self.pixel(fitted, 50, 10) == [0, 0, 255], "100x10, centred: rows 20...29")
    for bad in [
      WatermarkPlacement(image: large, opacity: 2), WatermarkPlacement(image: large, opacity: .nan),
      WatermarkPlacement(image: large, opacity: 1, scale: 3),
      WatermarkPlacement(image: large, opacity: 1, position: Gravity(.smart)),
      WatermarkPlacement(
        image: large, opacity: 1, position: Gravity(.centre, offsetX: -1), replicate: true),
    ] {
      var asked = spec
      asked.watermark = bad
      #expect((try? ValidSpec(asked)) == nil, "\(bad)")
    }
  }

  /// A red `inner` rectangle on white, placed at (left, top) of a `width` x `height` picture.
  static func framed(
    width: Int, height: Int, left: Int, top: Int, inner: (Int, Int)
  ) throws -> [UInt8] {
    var pixels: [UInt8] = []
    for y in 0..<height {
      for x in 0..<width {
        let inside = (left..<left + inner.0).contains(x) && (top..<top + inner.1).contains(y)
        pixels += inside ? [255, 0, 0] : [255, 255, 255]
      }
    }
    return try ImageEncoder.png(Bitmap(pixels: pixels, width: width, height: height, channels: 3))
  }

  @Test("trim cuts borders of one colour first; the rest of the request sees what is left")
  func trim() throws {
    let source = try Self.framed(width: 300, height: 200, left: 40, top: 30, inner: (120, 60))
    var spec = ThumbnailSpec(width: 60, height: 60)
    spec.geometry.trim = Trim(threshold: 10)
    let cut = try picture(source, spec)
    #expect(cut.width == 60 && cut.height == 30, "the 120x60 rectangle, contained")
    #expect(Self.pixel(cut, 0, 0) == [255, 0, 0] && Self.pixel(cut, 59, 29) == [255, 0, 0])
    spec.geometry.trim = Trim(threshold: 10, equalHorizontal: true, equalVertical: true)
    let even = try picture(source, spec)
    // Left 40 and right 140 become 40 each; top 30 and bottom 110, 30 each: 220x140.
    #expect(even.width == 60 && even.height == 38)
    spec.geometry.trim = Trim(threshold: 10, colour: RGBColour(red: 0, green: 0, blue: 0))
    #expect(try picture(source, spec).width == 60, "no black border: the whole 300x200")
    #expect(try picture(source, spec).height == 40)
    spec.geometry.trim = Trim(threshold: 255)
    let all = try picture(source, spec)
    #expect(all.width == 60 && all.height == 40, "a colour that matches everything cuts nothing")
    spec.geometry.trim = Trim(threshold: 10)
    spec.geometry.rotation = 90
    spec.geometry.cropWidth = 0.5
    let turned = try picture(source, spec)
    #expect(turned.width == 15 && turned.height == 60, "turned, then half its width kept")
    #expect(Self.pixel(turned, 7, 30) == [255, 0, 0])
  }
}
