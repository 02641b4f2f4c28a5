import Foundation
import Testing

@testable import LoadHarness

@Suite("thumbload's HTML report")
struct HTMLReportTests {
  /// The height of the bar whose tooltip starts with `range`.
  static func barHeight(_ svg: String, _ range: String) -> Double? {
    for part in svg.components(separatedBy: "<rect ").dropFirst()
    where part.contains("<title>\(range):") {
      guard let start = part.range(of: "height=\"") else { return nil }
      let rest = part[start.upperBound...]
      return Double(rest.prefix { $0 != "\"" })
    }
    return nil
  }

  @Test(
    "a mass of fast hits does not flatten the slow ones: counts on a log axis, ms on a log axis")
  func logScales() throws {
    let values = [Double](repeating: 0.3, count: 10_000) + [Double](repeating: 150, count: 20)
    let svg = HTMLReport.histogram(
      Report.histogram(values), percentiles: Percentiles(values), title: "all: load to result")
    let fast = try #require(Self.barHeight(svg, "0.2 ms to 0.5 ms"), "\(svg)")
    let slow = try #require(Self.barHeight(svg, "100 ms to 200 ms"), "\(svg)")
    // Linear would be 20/10,000 of the height; on a log axis it is about a third.
    #expect(slow / fast > 0.25 && slow < fast, "\(slow) vs \(fast)")
    // The millisecond axis is labelled in decades, the count axis in powers of ten.
    for label in [">0.1 ms<", ">1 ms<", ">10 ms<", ">100 ms<", ">1 s<", ">10 s<", ">> 10 s<"] {
      #expect(svg.contains(label.replacingOccurrences(of: ">>", with: ">&gt;")), "\(label)")
    }
    for label in [">1<", ">10<", ">100<", ">1000<", ">10000<"] { #expect(svg.contains(label)) }
    #expect(svg.contains("latency (log scale)") && svg.contains("count (log scale)"))
    #expect(svg.contains("(10020 samples)"))
  }

  @Test("p50, p95 and p99 are marked where they fall")
  func percentilesMarked() throws {
    let values = (1...100).map(Double.init)
    let svg = HTMLReport.histogram(
      Report.histogram(values), percentiles: Percentiles(values), title: "miss: load to result")
    for mark in ["p50 50 ms", "p95 95 ms", "p99 99 ms"] { #expect(svg.contains(">\(mark)<")) }
    // Each mark sits inside the bucket that holds it: p50 (50 ms) is the upper edge of 20-50.
    func x(_ name: String) throws -> Double {
      let text = try #require(svg.range(of: "fill=\"#d0644a\">\(name)"))
      let head = svg[..<text.lowerBound]
      let at = try #require(head.range(of: "<text x=\"", options: .backwards))
      return try #require(Double(head[at.upperBound...].prefix { $0 != "\"" }))
    }
    let (p50, p95, p99) = (try x("p50"), try x("p95"), try x("p99"))
    #expect(p50 < p95 && p95 < p99)
  }

  @Test("linear axes get round ticks up to a round top")
  func linearTicks() {
    let (top, ticks) = HTMLReport.linearTicks(73)
    #expect(top == 80 && ticks == [0, 20, 40, 60, 80])
    #expect(HTMLReport.linearTicks(0.37).ticks.count >= 3)
  }
}
