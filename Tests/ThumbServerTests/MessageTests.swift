import Foundation
import ImagePipeline
import LoadHarness
import Testing
import ThumbClient

@testable import TestSupport
@testable import ThumbServer

/// Every message a user reads (a CLI line, an error body, a log line) is a sentence written for
/// people: words, on one line, never a Swift case name like `duplicateHost` or `connect(111)`.
@Suite("Messages for people")
struct MessageTests {
  /// What makes `text` not a sentence; empty when it is one.
  static func problems(_ text: String) -> [String] {
    var found: [String] = []
    if !text.contains(" ") { found.append("a single word") }
    if text.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) {
      found.append("a control character (messages are one line)")
    }
    // Proper names whose capitals sit inside the word.
    let names: Set<Substring> = ["WebP", "MiB", "KiB", "GiB", "ThumbHash"]
    for word in text.split(whereSeparator: { !$0.isLetter && !$0.isNumber }) {
      let letters = Array(word)
      let camel = zip(letters, letters.dropFirst()).contains { $0.isLowercase && $1.isUppercase }
      if camel && !names.contains(word) { found.append("the identifier \(word)") }
    }
    // A case with a payload, as Swift prints one: `connect(111)`, `Optional("x")`.
    if text.range(of: #"[A-Za-z_]\("#, options: .regularExpression) != nil {
      found.append("a call-like name(")
    }
    if text.contains("Error.") || text.contains("Error(") { found.append("a type name") }
    return found
  }

  /// Checks both what the type says (`message`) and what interpolation prints.
  static func check(_ message: String, _ value: Any, _ label: String) {
    #expect(problems(message).isEmpty, "\(label): \(message): \(problems(message))")
    let printed = String(describing: value)
    #expect(problems(printed).isEmpty, "\(label) printed: \(printed): \(problems(printed))")
  }

  @Test("the rule itself catches case names, payload cases and line breaks")
  func ruleCatches() {
    #expect(!Self.problems("duplicateHost").isEmpty)
    #expect(!Self.problems("connect(111)").isEmpty)
    #expect(!Self.problems("the request has a requestLineTooLong").isEmpty)
    #expect(!Self.problems("first line\nsecond line").isEmpty)
    #expect(!Self.problems("cancelled").isEmpty)
    #expect(Self.problems("the WebP file ends inside its 'VP8 ' chunk (12 bytes short)").isEmpty)
  }

  /// One of each case; the switch has no default, so a new case does not compile until it has
  /// a sample here.
  static let thumbnailErrors: [ThumbnailError] = [
    .unsupportedFormat("the bytes are in no known image format"), .corrupt("bad Huffman code"),
    .truncated("the file ends inside its 'mdat' box"),
    .tooLarge(width: 9, height: 9, message: "9x9 is 81 pixels, over the limit of 80 pixels"),
    .cancelled, .outOfMemory("the decoder ran out of memory"), .io("cannot open /x: No such file"),
    .invalidSpec("width must be 1 to 4096"), .encodingFailed("the WebP encoder failed"),
    .timedOut("the decode took longer than its deadline"),
    .tooComplex("more than 64 scans"),
  ]
  static func covers(_ error: ThumbnailError) -> Int {
    switch error {
    case .unsupportedFormat: 0
    case .corrupt: 1
    case .truncated: 2
    case .tooLarge: 3
    case .cancelled: 4
    case .outOfMemory: 5
    case .io: 6
    case .invalidSpec: 7
    case .encodingFailed: 8
    case .timedOut: 9
    case .tooComplex: 10
    }
  }

  static let fetchErrors: [FetchError] = [
    .notAllowed("the address 10.0.0.1 is private"), .httpStatus(404), .tooLarge(limit: 1 << 20),
    .timedOut("the origin did not answer within 5 s"), .tooManyRedirects(5),
    .io("not a regular file"), .transport("connection reset by peer"),
    .invalidURL("the URL has no host"), .badResponse("two different Content-Length values"),
  ]
  static func covers(_ error: FetchError) -> Int {
    switch error {
    case .notAllowed: 0
    case .httpStatus: 1
    case .tooLarge: 2
    case .timedOut: 3
    case .tooManyRedirects: 4
    case .io: 5
    case .transport: 6
    case .invalidURL: 7
    case .badResponse: 8
    }
  }

  static let pipelineErrors: [PipelineError] = [
    .thumbnail(.cancelled), .fetch(.httpStatus(500)), .queueFull,
    .overBudget(needed: 300 << 20, limit: 256 << 20),
  ]
  static func covers(_ error: PipelineError) -> Int {
    switch error {
    case .thumbnail: 0
    case .fetch: 1
    case .queueFull: 2
    case .overBudget: 3
    }
  }

  static let clientErrors: [ThumbClient.ClientError] = [
    .connect(ECONNREFUSED), .handshake("HTTP/1.1 404 Not Found"), .closed, .frameTooLarge(20_000),
  ]
  static func covers(_ error: ThumbClient.ClientError) -> Int {
    switch error {
    case .connect: 0
    case .handshake: 1
    case .closed: 2
    case .frameTooLarge: 3
    }
  }

  static let diskCacheErrors: [DiskCacheError] = [
    .inUse("/var/cache/thumbd"), .cannotOpen("cannot create /var/cache/thumbd: Permission denied"),
  ]
  static func covers(_ error: DiskCacheError) -> Int {
    switch error {
    case .inUse: 0
    case .cannotOpen: 1
    }
  }

  @Test("every case of every error type a user reads is a sentence, in its message and printed")
  func everyCase() {
    #expect(Set(Self.thumbnailErrors.map(Self.covers)).count == 11)
    for error in Self.thumbnailErrors { Self.check(error.message, error, "ThumbnailError") }
    #expect(Set(Self.fetchErrors.map(Self.covers)).count == 9)
    for error in Self.fetchErrors { Self.check(error.message, error, "FetchError") }
    #expect(Set(Self.pipelineErrors.map(Self.covers)).count == 4)
    for error in Self.pipelineErrors { Self.check(error.message, error, "PipelineError") }
    #expect(Set(Self.clientErrors.map(Self.covers)).count == 4)
    for error in Self.clientErrors { Self.check(error.description, error, "ClientError") }
    #expect(Set(Self.diskCacheErrors.map(Self.covers)).count == 2)
    for error in Self.diskCacheErrors { Self.check(error.description, error, "DiskCacheError") }
    for error in HTTPParseError.allCases {
      Self.check(error.description, error, "HTTPParseError")
      // An error body: a capitalised sentence with its full stop.
      #expect(error.description.first?.isUppercase == true && error.description.hasSuffix("."))
    }
    let server = ServerError.system("bind", EADDRINUSE)
    Self.check(server.description, server, "ServerError")
    let harness = HarnessError.setup("the origin could not listen")
    Self.check(harness.description, harness, "HarnessError")
  }

  @Test("what the decoders say about every rejected corpus file is a sentence")
  func decoderMessages() throws {
    let thumbnailer = Thumbnailer()
    let spec = ThumbnailSpec(width: 64, height: 64)
    let entries =
      Corpus.entries(expected: "must-reject") + Corpus.entries(expected: "either")
      + Corpus.formatEntries(expected: "must-reject") + Corpus.formatEntries(expected: "either")
    var refused = 0
    for entry in entries {
      do {
        _ = try thumbnailer.thumbnail(.bytes(Corpus.bytes(entry.path)), spec: ValidSpec(spec))
      } catch let error as ThumbnailError {
        refused += 1
        Self.check(error.message, error, entry.path)
      }
    }
    #expect(refused >= 100, "only \(refused) refusals: is the corpus there?")
    // Over each limit in turn: the message names the one passed.
    let photo = try Corpus.bytes("photo/coil/large.jpg")
    let limits: [(DecodingLimits, String)] = [
      (DecodingLimits(maxWidth: 100), "wider than the limit of 100 pixels a side"),
      (DecodingLimits(maxHeight: 100), "taller than the limit of 100 pixels a side"),
      (DecodingLimits(maxPixels: 1000), "over the limit of 1000 pixels"),
    ]
    for (limit, words) in limits {
      #expect {
        _ = try Thumbnailer(limits: limit).thumbnail(.bytes(photo), spec: ValidSpec(spec))
      } throws: { error in
        guard let error = error as? ThumbnailError, case .tooLarge = error else { return false }
        return error.message.contains(words) && Self.problems(error.message).isEmpty
      }
    }
  }
}
