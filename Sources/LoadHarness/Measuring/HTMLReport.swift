import Foundation

/// A self-contained HTML page for a report: the summary and three SVG charts (latency
/// histogram, time to visible over time, server RSS over time). No scripts, no fonts, no
/// network.
public enum HTMLReport {
  /// The page.
  public static func render(_ report: Report) -> String {
    let summary = escape(report.summary())
    let histogram = barChart(
      report.latencyHistogram.map { ($0[0] < 0 ? ">10s" : label($0[0]), $0[1]) },
      title: "Latency of shown images and errors (ms, upper bucket bound)")
    let ttv = scatter(
      report.timeToVisibleSeries.map { ($0[0], $0[1]) },
      title: "Time to visible (ms) over the run (s)")
    let rss = line(report.rssMb.map { ($0[0], $0[1]) }, title: "Server RSS (MiB) over the run (s)")
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
      </style></head><body>
      <h1>thumbload: \(escape(report.scenario))</h1>
      <p>Target \(escape(report.target)); wrong deliveries:
      <span class="\(report.wrongDeliveries > 0 ? "fail" : "")">\(report.wrongDeliveries)</span>;
      stale deliveries:
      <span class="\(report.staleDeliveries > 0 ? "fail" : "")">\(report.staleDeliveries)</span>
      (\(report.mutationRate) item changes/s).</p>
      <pre>\(summary)</pre>
      \(histogram)
      \(ttv)
      \(rss)
      </body></html>
      """
  }

  private static func label(_ value: Double) -> String {
    value >= 1000 ? "\(Int(value / 1000))s" : "\(Int(value))"
  }

  private static func escape(_ text: String) -> String {
    text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
      .replacingOccurrences(of: ">", with: "&gt;")
  }

  private static let width = 720.0
  private static let height = 240.0
  private static let margin = 40.0

  private static func frame(_ title: String, _ body: String, xLabel: String, yMax: Double) -> String
  {
    """
    <svg width="\(Int(width))" height="\(Int(height))" \
    viewBox="0 0 \(Int(width)) \(Int(height))" role="img" aria-label="\(escape(title))">
    <text x="\(margin)" y="16">\(escape(title))</text>
    <line x1="\(margin)" y1="\(height - margin)" x2="\(width - 10)" y2="\(height - margin)" stroke="#999"/>
    <line x1="\(margin)" y1="26" x2="\(margin)" y2="\(height - margin)" stroke="#999"/>
    <text x="4" y="32">\(format(yMax))</text><text x="4" y="\(height - margin)">0</text>
    <text x="\(width - 60)" y="\(height - 8)">\(escape(xLabel))</text>
    \(body)
    </svg>
    """
  }

  private static func format(_ value: Double) -> String {
    value >= 100 ? String(Int(value)) : String(format: "%.1f", value)
  }

  private static func barChart(_ bars: [(String, Double)], title: String) -> String {
    let maxValue = max(1, bars.map(\.1).max() ?? 1)
    let slot = (width - margin - 20) / Double(max(1, bars.count))
    var body = ""
    for (index, bar) in bars.enumerated() {
      let barHeight = (height - margin - 30) * bar.1 / maxValue
      let x = margin + Double(index) * slot + 4
      body +=
        "<rect x=\"\(x)\" y=\"\(height - margin - barHeight)\" width=\"\(slot - 8)\" "
        + "height=\"\(barHeight)\" fill=\"#4a7fd0\"><title>\(bar.0) ms: \(Int(bar.1))</title></rect>"
        + "<text x=\"\(x)\" y=\"\(height - margin + 14)\">\(escape(bar.0))</text>"
    }
    return frame(title, body, xLabel: "", yMax: maxValue)
  }

  private static func scatter(_ points: [(Double, Double)], title: String) -> String {
    // At most 3000 points keep the page light; an even sample keeps the shape.
    let step = max(1, points.count / 3000)
    let sample = stride(from: 0, to: points.count, by: step).map { points[$0] }
    let maxX = max(1, sample.map(\.0).max() ?? 1)
    let maxY = max(1, sample.map(\.1).max() ?? 1)
    var body = ""
    for (x, y) in sample {
      let px = margin + (width - margin - 20) * x / maxX
      let py = height - margin - (height - margin - 30) * y / maxY
      body += "<circle cx=\"\(px)\" cy=\"\(py)\" r=\"1.5\" fill=\"#d0644a\" fill-opacity=\"0.6\"/>"
    }
    return frame(title, body, xLabel: "\(format(maxX)) s", yMax: maxY)
  }

  private static func line(_ points: [(Double, Double)], title: String) -> String {
    let maxX = max(1, points.map(\.0).max() ?? 1)
    let maxY = max(1, points.map(\.1).max() ?? 1)
    let coordinates = points.map { x, y in
      "\(margin + (width - margin - 20) * x / maxX),\(height - margin - (height - margin - 30) * y / maxY)"
    }
    let body =
      "<polyline fill=\"none\" stroke=\"#3a9a5a\" stroke-width=\"2\" points=\"\(coordinates.joined(separator: " "))\"/>"
    return frame(title, body, xLabel: "\(format(maxX)) s", yMax: maxY)
  }
}
