import ImagePipeline
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

// A list of 240 photos scrolled through 8 recycled cells, as a collection view shows them:
// each cell is an `ImageSlot`, the items about to appear are announced to a
// `PrefetchCoordinator`, and the network answers out of order. Every picture a cell shows is
// decoded and checked against the item the cell holds; the run fails if one is wrong.

let itemCount = 240
let cellCount = 8
let lookAhead = 8

/// Item `n`'s picture is one colour, so a shown thumbnail says which item it is.
func colour(of item: Int) -> (UInt8, UInt8, UInt8) {
  (UInt8(item * 37 & 0xFF), UInt8((item * 91 + 64) & 0xFF), UInt8((item * 53 + 128) & 0xFF))
}

/// The item whose colour is nearest to a decoded thumbnail's centre.
func itemShown(by data: [UInt8]) -> Int? {
  guard let bitmap = try? Thumbnailer().decodeFullResolution(.bytes(data)) else { return nil }
  let centre = ((bitmap.height / 2) * bitmap.width + bitmap.width / 2) * bitmap.channels
  let pixel = bitmap.pixels[centre..<centre + 3].map { Int($0) }
  func distance(_ item: Int) -> Int {
    let (r, g, b) = colour(of: item)
    return abs(Int(r) - pixel[0]) + abs(Int(g) - pixel[1]) + abs(Int(b) - pixel[2])
  }
  return (0..<itemCount).min { distance($0) < distance($1) }
}

/// A slow, jittery network: each photo arrives after 0-59 ms, so results cross each other and
/// most cells are recycled before their picture comes.
struct SimulatedNetwork: DataLoading {
  let photos: [String: [UInt8]]

  func load(_ request: SourceRequest) async throws -> SourceResponse {
    guard let bytes = photos[request.url] else { throw FetchError.httpStatus(404) }
    try await Task.sleep(for: .milliseconds(bytes.count * 7 % 60))
    return .modified(bytes, .unversioned())
  }
}

func url(_ item: Int) -> String { "https://photos.example/\(item).png" }

// Checked once; every request is made from the checked spec.
let spec = try ValidSpec(ThumbnailSpec(width: 32, height: 32, format: .png))

var photos: [String: [UInt8]] = [:]
for item in 0..<itemCount {
  let (r, g, b) = colour(of: item)
  let pixels = [UInt8]((0..<(64 * 48)).flatMap { _ in [r, g, b] })
  // Keyed as the pipeline asks: the URL in its normal form.
  photos[ImageRequest(url: url(item), spec: spec).url] =
    try ImageEncoder.png(Bitmap(pixels: pixels, width: 64, height: 48, channels: 3))
}

let pipeline = ThumbnailPipeline(configuration: .init(dataLoader: SimulatedNetwork(photos: photos)))
let request: @Sendable (Int) -> ImageRequest = { ImageRequest(url: url($0), spec: spec) }

/// What the cells showed, how many of those were the wrong item, each cell's last picture, and
/// the failures the cells were handed.
let tally = Mutex<(shown: Int, wrong: Int, last: [Int: Int], failures: [String])>((0, 0, [:], []))
let cells = (0..<cellCount).map { cell in
  ImageSlot<Int, ImageResponse>(pipeline: pipeline, request: request) { item, result in
    // Called only for the item and token the cell holds now: the slot dropped the rest.
    guard case .success(let response) = result else {
      if case .failure(let error) = result {
        tally.withLock { $0.failures.append("\(item): \(error)") }
      }
      return
    }
    let shown = itemShown(by: response.thumbnail.data)
    tally.withLock {
      $0.shown += 1
      if shown != item { $0.wrong += 1 }
      $0.last[cell] = shown
    }
  }
}
let prefetcher = PrefetchCoordinator<Int>(pipeline: pipeline, request: request)

// Scroll from the top to the bottom, one row every 2 ms: far faster than the network, so
// most cells are recycled before their picture comes.
var holding = [Int?](repeating: nil, count: cellCount)
var round: PrefetchCoordinator<Int>.Round?
for top in 0...(itemCount - cellCount) {
  for index in top..<(top + cellCount) where holding[index % cellCount] != index {
    holding[index % cellCount] = index
    await cells[index % cellCount].load(index)
  }
  let ahead = Array((top + cellCount)..<min(itemCount, top + cellCount + lookAhead))
  let next = await prefetcher.prefetch(ahead)
  if let round { await prefetcher.release(round) }
  round = next
  try await Task.sleep(for: .milliseconds(2))
}

// The last screen settles: every cell shows the item it holds.
let finalScreen = Dictionary(
  uniqueKeysWithValues: holding.enumerated().map { ($0.offset, $0.element) })
for _ in 0..<3000 {
  if tally.withLock({ state in finalScreen.allSatisfy { state.last[$0.key] == $0.value } }) {
    break
  }
  try await Task.sleep(for: .milliseconds(10))
}
var dropped = 0
for cell in cells { dropped += await cell.staleDrops }
let (shown, wrong, last, failures) = tally.withLock { $0 }
let settled = finalScreen.allSatisfy { last[$0.key] == $0.value }
print(
  "list-simulation: \(shown) pictures shown in \(cellCount) recycled cells over \(itemCount) items, "
    + "\(dropped) stale results dropped by the cells, \(wrong) wrong, last screen "
    + (settled ? "complete" : "INCOMPLETE"))
for failure in failures.prefix(5) {
  print("list-simulation: a cell was handed a failure: \(failure)")
}
if !settled {
  for (cell, item) in finalScreen.sorted(by: { $0.key < $1.key }) where last[cell] != item {
    print(
      "list-simulation: cell \(cell) holds item \(item ?? -1) but shows \(last[cell].map(String.init) ?? "nothing")"
    )
  }
}
if wrong > 0 || !settled {
  print("list-simulation: FAILED")
  exit(1)
}
