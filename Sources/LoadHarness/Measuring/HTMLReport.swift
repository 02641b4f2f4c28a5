import Foundation

/// A self-contained HTML page for a report: the summary and SVG charts (a latency histogram per
/// outcome on log-scale axes with its percentiles marked, the share of loads painted over time by
/// first pixel, preview and image, time to visible over the run, server RSS over the run). Every
/// axis is labelled with its unit and ticks. No scripts, no fonts, no network.
public enum HTMLReport {
  /// The page.
  public static func render(_ report: Report) -> String {
    let summary = escape(report.summary())
    // Shown outcomes first, in the order a reader compares them; cancelled (load to
    // supersede) last.
    let order = ["memory", "disk", "coalesced", "miss", "revalidated", "stale", "error"]
    let outcomes = report.latencyHistogramByOutcome.keys.sorted {
      (order.firstIndex(of: $0) ?? order.count, $0) < (order.firstIndex(of: $1) ?? order.count, $1)
    }
    let histograms = outcomes.map { outcome in
      histogram(
        report.latencyHistogramByOutcome[outcome] ?? [],
        percentiles: report.latencyByOutcomeMs[outcome],
        title: outcome == "cancelled"
          ? "cancelled: load to supersede" : "\(outcome): load to result")
    }.joined(separator: "\n")
    let paints = paintChart(report.paintHistograms)
    let ttv = scatter(
      report.timeToVisibleSeries.map { ($0[0], $0[1]) },
      title: "Time to visible over the run", xUnit: "s into the run", yUnit: "ms")
    let rss = line(
      report.rssMb.map { ($0[0], $0[1]) }, title: "Server resident memory over the run",
      xUnit: "s into the run", yUnit: "MiB")
    return """
      <!doctype html>
      <html lang="en"><head><meta charset="utf-8">
      <title>thumbload: \(escape(report.scenario))</title>
      <style>
      body { font: 14px/1.4 system-ui, sans-serif; margin: 2em; color: #222; }
      pre { background: #f6f6f6; padding: 1em; overflow-x: auto; }
      .fail { color: #b00; font-weight: bold; }
      svg { display: block; margin: 1em 0 2em; background: #fff; border: 1px solid #ddd; }
      text { font: 11px system-ui, sans-serif; fill: #444; }
      text.title { font-weight: bold; fill: #222; }
      </style></head><body>
      <h1>thumbload: \(escape(report.scenario))</h1>
      <p>Target \(escape(report.target)); wrong deliveries:
      <span class="\(report.wrongDeliveries > 0 ? "fail" : "")">\(report.wrongDeliveries)</span>;
      stale deliveries:
      <span class="\(report.staleDeliveries > 0 ? "fail" : "")">\(report.staleDeliveries)</span>
      (\(report.mutationRate) item changes/s).</p>
      <pre>\(summary)</pre>
      <h2>Latency by outcome</h2>
      <p>Milliseconds across and counts up, both on log scales; each outcome has its own count
      axis. Dashed lines mark p50, p95 and p99.</p>
      \(histograms)
      <h2>First pixel, preview and image</h2>
      <p>Share of loads that had painted something (a placeholder, a preview or the image), a
      preview, and the image, by milliseconds after the load (log scale; previews: share of the
      loads that got one).</p>
      \(paints)
      <h2>Over the run</h2>
      \(ttv)
      \(rss)
      </body></html>
      """
  }

  static func escape(_ text: String) -> String {
    text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
      .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
  }

  // MARK: - Geometry

  private static let width = 760.0
  private static let height = 260.0
  /// Room for tick labels and axis titles.
  private static let left = 64.0
  private static let right = 20.0
  private static let top = 30.0
  private static let bottom = 44.0

  private static var plotWidth: Double { width - left - right }
  private static var plotHeight: Double { height - top - bottom }

  /// A tick: its position along the axis (0...1) and its label.
  struct Tick {
    let at: Double
    let label: String
  }

  /// The frame: title, both axes with their ticks and unit titles, then `body`.
  private static func frame(
    _ title: String, _ body: String, xTicks: [Tick], yTicks: [Tick], xUnit: String,
    yUnit: String
  ) -> String {
    let baseline = top + plotHeight
    var axes =
      "<text class=\"title\" x=\"\(left)\" y=\"18\">\(escape(title))</text>"
      + "<line x1=\"\(left)\" y1=\"\(baseline)\" x2=\"\(left + plotWidth)\" y2=\"\(baseline)\" stroke=\"#999\"/>"
      + "<line x1=\"\(left)\" y1=\"\(top)\" x2=\"\(left)\" y2=\"\(baseline)\" stroke=\"#999\"/>"
    for tick in xTicks {
      let x = left + plotWidth * tick.at
      axes +=
        "<line x1=\"\(x)\" y1=\"\(baseline)\" x2=\"\(x)\" y2=\"\(baseline + 4)\" stroke=\"#999\"/>"
        + "<text x=\"\(x)\" y=\"\(baseline + 16)\" text-anchor=\"middle\">\(escape(tick.label))</text>"
    }
    for tick in yTicks {
      let y = baseline - plotHeight * tick.at
      axes +=
        "<line x1=\"\(left - 4)\" y1=\"\(y)\" x2=\"\(left + plotWidth)\" y2=\"\(y)\" stroke=\"#eee\"/>"
        + "<text x=\"\(left - 6)\" y=\"\(y + 4)\" text-anchor=\"end\">\(escape(tick.label))</text>"
    }
    axes +=
      "<text x=\"\(left + plotWidth / 2)\" y=\"\(height - 6)\" text-anchor=\"middle\">\(escape(xUnit))</text>"
      + "<text x=\"14\" y=\"\(top + plotHeight / 2)\" text-anchor=\"middle\" "
      + "transform=\"rotate(-90 14 \(top + plotHeight / 2))\">\(escape(yUnit))</text>"
    return """
      <svg width="\(Int(width))" height="\(Int(height))" \
      viewBox="0 0 \(Int(width)) \(Int(height))" role="img" aria-label="\(escape(title))">
      \(axes)
      \(body)
      </svg>
      """
  }

  // MARK: - Scales

  /// "0.1 ms", "20 ms", "2 s".
  static func milliseconds(_ value: Double) -> String {
    if value >= 1000 { return "\(number(value / 1000)) s" }
    return "\(number(value)) ms"
  }

  /// A short number: no trailing ".0", one decimal below 10.
  static func number(_ value: Double) -> String {
    if value == value.rounded() && abs(value) < 1e15 { return String(Int(value)) }
    return value >= 10 ? String(Int(value.rounded())) : String(format: "%.1f", value)
  }

  /// Up to about five round ticks from 0 to `maximum` (1, 2 or 5 times a power of ten apart).
  static func linearTicks(_ maximum: Double) -> (top: Double, ticks: [Double]) {
    let top = max(maximum, 1e-9)
    let rough = top / 5
    let power = pow(10, (log10(rough)).rounded(.down))
    let step = [1.0, 2, 5, 10].map { $0 * power }.first { $0 >= rough } ?? 10 * power
    let last = (top / step).rounded(.up) * step
    return (last, stride(from: 0, through: last + step / 2, by: step).map { $0 })
  }

  /// Powers of ten from 1 to the first at or above `maximum`: a log count axis.
  static func logTicks(_ maximum: Double) -> [Double] {
    var ticks = [1.0]
    while ticks.last! < maximum { ticks.append(ticks.last! * 10) }
    if ticks.count == 1 { ticks.append(10) }
    return ticks
  }

  // MARK: - Charts

  /// One outcome's histogram: buckets on a log millisecond axis (each a 1-2-5 step, equal in
  /// width on the page), counts on a log axis, and its percentiles as dashed lines.
  static func histogram(_ buckets: [[Double]], percentiles: Percentiles?, title: String)
    -> String
  {
    let bounds = Report.histogramBounds
    // Positions: bucket i spans [i, i+1) of bounds.count slots; the last slot is "> 10 s".
    let slot = 1.0 / Double(bounds.count)
    let counts = bucketCounts(buckets)
    let total = Int(counts.reduce(0, +))
    let ticks = logTicks(counts.max() ?? 1)
    func y(_ count: Double) -> Double { count <= 0 ? 0 : log10(count + 1) / log10(ticks.last! + 1) }
    var body = ""
    for (index, count) in counts.enumerated() where count > 0 {
      let barHeight = plotHeight * y(count)
      let x = left + plotWidth * slot * Double(index) + 2
      let range =
        index == bounds.count - 1
        ? "over \(milliseconds(bounds[index - 1]))"
        : "\(index == 0 ? "0" : milliseconds(bounds[index - 1])) to \(milliseconds(bounds[index]))"
      body +=
        "<rect x=\"\(x)\" y=\"\(top + plotHeight - barHeight)\" width=\"\(plotWidth * slot - 4)\" "
        + "height=\"\(barHeight)\" fill=\"#4a7fd0\"><title>\(range): \(Int(count))</title></rect>"
    }
    // A latency's position: log-linear inside its bucket.
    func x(_ ms: Double) -> Double {
      guard let index = bounds.firstIndex(where: { ms <= $0 }), index < bounds.count - 1 else {
        return 1 - slot / 2
      }
      let lower = index == 0 ? bounds[0] / 10 : bounds[index - 1]
      let within = max(0, min(1, log10(max(ms, lower) / lower) / log10(bounds[index] / lower)))
      return slot * (Double(index) + within)
    }
    if let percentiles, percentiles.count > 0 {
      let marks = [("p50", percentiles.p50), ("p95", percentiles.p95), ("p99", percentiles.p99)]
      for (rank, (name, value)) in marks.enumerated() {
        let px = left + plotWidth * x(value)
        body +=
          "<line x1=\"\(px)\" y1=\"\(top)\" x2=\"\(px)\" y2=\"\(top + plotHeight)\" "
          + "stroke=\"#d0644a\" stroke-dasharray=\"4 3\"/>"
          + "<text x=\"\(px + 3)\" y=\"\(top + 10 + 12 * Double(rank))\" fill=\"#d0644a\">"
          + "\(name) \(escape(milliseconds(value)))</text>"
      }
    }
    let xTicks = latencyTicks() + [Tick(at: 1 - slot / 2, label: "> 10 s")]
    let yTicks = ticks.map {
      Tick(at: log10($0 + 1) / log10(ticks.last! + 1), label: number($0))
    }
    return frame(
      "\(title) (\(total) samples)", body, xTicks: xTicks, yTicks: yTicks,
      xUnit: "latency (log scale)", yUnit: "count (log scale)")
  }

  /// A report histogram's counts, one per bucket of `Report.histogramBounds` (the last: above
  /// 10 s).
  static func bucketCounts(_ buckets: [[Double]]) -> [Double] {
    let bounds = Report.histogramBounds
    var counts = [Double](repeating: 0, count: bounds.count)
    for bucket in buckets where bucket.count == 2 {
      let index = bucket[0] < 0 ? bounds.count - 1 : bounds.firstIndex(of: bucket[0])
      if let index { counts[index] += bucket[1] }
    }
    return counts
  }

  /// Ticks at the latency buckets' upper edges, every third 1-2-5 step (the labels stay
  /// apart), each bucket an equal slot across the axis.
  static func latencyTicks() -> [Tick] {
    let bounds = Report.histogramBounds
    let slot = 1.0 / Double(bounds.count)
    return bounds.enumerated().compactMap { index, bound in
      bound.isFinite && index % 3 == 0
        ? Tick(at: slot * Double(index + 1), label: milliseconds(bound)) : nil
    }
  }

  /// Cumulative shares of `first_pixel`, `preview` and `image` (histograms on the latency
  /// buckets) as three lines on the histograms' log millisecond axis.
  static func paintChart(_ histograms: [String: [[Double]]]) -> String {
    let bounds = Report.histogramBounds
    let slot = 1.0 / Double(bounds.count)
    let series = [
      ("first pixel", "first_pixel", "#3a9a5a"), ("preview", "preview", "#d0944a"),
      ("image", "image", "#4a7fd0"),
    ]
    var body = ""
    for (rank, (name, key, colour)) in series.enumerated() {
      let counts = bucketCounts(histograms[key] ?? [])
      let total = counts.reduce(0, +)
      guard total > 0 else { continue }
      var cumulative = 0.0
      var points = ["\(left),\(top + plotHeight)"]
      for (index, count) in counts.enumerated() {
        cumulative += count
        let x = left + plotWidth * slot * Double(index + 1)
        points.append("\(x),\(top + plotHeight - plotHeight * cumulative / total)")
      }
      body +=
        "<polyline fill=\"none\" stroke=\"\(colour)\" stroke-width=\"2\" "
        + "points=\"\(points.joined(separator: " "))\"/>"
        + "<text x=\"\(left + 8)\" y=\"\(top + 12 + 14 * Double(rank))\" style=\"fill: \(colour)\">"
        + "\(name) (\(Int(total)))</text>"
    }
    let xTicks = latencyTicks()
    let yTicks = [0.0, 0.25, 0.5, 0.75, 1].map { Tick(at: $0, label: "\(Int($0 * 100))%") }
    return frame(
      "Loads painted by then", body, xTicks: xTicks, yTicks: yTicks,
      xUnit: "ms after the load (log scale)", yUnit: "share of loads")
  }

  static func scatter(_ points: [(Double, Double)], title: String, xUnit: String, yUnit: String)
    -> String
  {
    // At most 3000 points keep the page light; an even sample keeps the shape.
    let step = max(1, points.count / 3000)
    let sample = stride(from: 0, to: points.count, by: step).map { points[$0] }
    let (maxX, xs) = linearTicks(sample.map(\.0).max() ?? 1)
    let (maxY, ys) = linearTicks(sample.map(\.1).max() ?? 1)
    var body = ""
    for (x, y) in sample {
      let px = left + plotWidth * x / maxX
      let py = top + plotHeight - plotHeight * y / maxY
      body += "<circle cx=\"\(px)\" cy=\"\(py)\" r=\"1.5\" fill=\"#d0644a\" fill-opacity=\"0.6\"/>"
    }
    return frame(
      title, body, xTicks: xs.map { Tick(at: $0 / maxX, label: number($0)) },
      yTicks: ys.map { Tick(at: $0 / maxY, label: number($0)) }, xUnit: xUnit, yUnit: yUnit)
  }

  static func line(_ points: [(Double, Double)], title: String, xUnit: String, yUnit: String)
    -> String
  {
    let (maxX, xs) = linearTicks(points.map(\.0).max() ?? 1)
    let (maxY, ys) = linearTicks(points.map(\.1).max() ?? 1)
    let coordinates = points.map { x, y in
      "\(left + plotWidth * x / maxX),\(top + plotHeight - plotHeight * y / maxY)"
    }
    let body =
      "<polyline fill=\"none\" stroke=\"#3a9a5a\" stroke-width=\"2\" "
      + "points=\"\(coordinates.joined(separator: " "))\"/>"
    return frame(
      title, body, xTicks: xs.map { Tick(at: $0 / maxX, label: number($0)) },
      yTicks: ys.map { Tick(at: $0 / maxY, label: number($0)) }, xUnit: xUnit, yUnit: yUnit)
  }
}
