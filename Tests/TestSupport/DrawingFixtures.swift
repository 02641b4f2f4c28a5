/// PDFs and SVGs written here, whose pictures are known: a page or drawing split into a red
/// left half and a blue right half, with a green band along its top, so a thumbnail of the
/// wrong page, turned or mirrored, shows.
enum DrawingFixtures {
  /// A one-page PDF of `width` x `height` points, turned by `rotate` degrees (its `/Rotate`),
  /// with `pages` pages (every page after the first is black).
  static func pdf(width: Int, height: Int, rotate: Int = 0, pages: Int = 1) -> [UInt8] {
    let band = height * 3 / 4
    let first =
      "1 0 0 rg 0 0 \(width / 2) \(height) re f\n0 0 1 rg \(width / 2) 0 \(width - width / 2) \(height) re f\n0 1 0 rg 0 \(band) \(width) \(height - band) re f\n"
    let other = "0 0 0 rg 0 0 \(width) \(height) re f\n"
    var objects = [
      "<< /Type /Catalog /Pages 2 0 R >>",
      "<< /Type /Pages /Kids [\((0..<pages).map { "\(3 + 2 * $0) 0 R" }.joined(separator: " "))] /Count \(pages) >>",
    ]
    for page in 0..<pages {
      let content = page == 0 ? first : other
      objects.append(
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 \(width) \(height)] /Rotate \(rotate) /Contents \(4 + 2 * page) 0 R >>"
      )
      objects.append("<< /Length \(content.utf8.count) >>\nstream\n\(content)endstream")
    }
    var text = "%PDF-1.4\n"
    var offsets: [Int] = []
    for (index, object) in objects.enumerated() {
      offsets.append(text.utf8.count)
      text += "\(index + 1) 0 obj\n\(object)\nendobj\n"
    }
    let table = text.utf8.count
    text += "xref\n0 \(objects.count + 1)\n0000000000 65535 f \n"
    for offset in offsets {
      let digits = String(offset)
      text += String(repeating: "0", count: 10 - digits.count) + digits + " 00000 n \n"
    }
    text += "trailer\n<< /Size \(objects.count + 1) /Root 1 0 R >>\nstartxref\n\(table)\n%%EOF\n"
    return Array(text.utf8)
  }

  /// An SVG of `width` x `height` pixels with the same halves and band, inside a transparent
  /// margin of `margin` pixels; `extra` goes inside the root element.
  static func svg(width: Int, height: Int, margin: Int = 0, extra: String = "") -> [UInt8] {
    let (w, h) = (width - 2 * margin, height - 2 * margin)
    let text = """
      <?xml version="1.0" encoding="UTF-8"?>
      <!-- drawn for thumbd's tests -->
      <svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" width="\(width)" height="\(height)">
      <rect x="\(margin)" y="\(margin)" width="\(w / 2)" height="\(h)" fill="#ff0000"/>
      <rect x="\(margin + w / 2)" y="\(margin)" width="\(w - w / 2)" height="\(h)" fill="#0000ff"/>
      <rect x="\(margin)" y="\(margin)" width="\(w)" height="\(h / 4)" fill="#00ff00"/>
      \(extra)
      </svg>
      """
    return Array(text.utf8)
  }
}
