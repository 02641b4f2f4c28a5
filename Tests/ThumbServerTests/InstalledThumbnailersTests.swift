import Foundation
import Sandbox
import Testing
import ThumbServer

@testable import TestSupport

#if canImport(Glibc)
  import Glibc
#endif

/// Installed `*.thumbnailer` entries (issue 53): parsed strictly, split into arguments
/// without a shell, chosen per MIME type as gnome-desktop chooses.
@Suite("Installed thumbnailers")
struct InstalledThumbnailersTests {
  static func parse(_ text: String) throws(ThumbnailerEntry.Refusal) -> ThumbnailerEntry {
    try ThumbnailerEntry.parse(Array(text.utf8), source: "test.thumbnailer")
  }

  @Test("the entries Debian's thumbnailers ship parse, and every one installed here does")
  func realEntries() throws {
    let shipped = [
      "[Thumbnailer Entry]\nTryExec=ffmpegthumbnailer\nExec=ffmpegthumbnailer -i %i -o %o -s %s -f\nMimeType=video/jpeg;video/mp4;video/mpeg;video/quicktime;video/x-ms-asf;video/x-ms-wm;video/x-ms-wmv;video/x-ms-asx;video/x-ms-wmx;video/x-ms-wvx;video/x-msvideo;video/x-flv;video/x-matroska;application/mxf;video/3gp;video/3gpp;video/dv;video/divx;video/fli;video/flv;video/mp2t;video/mp4v-es;video/msvideo;video/ogg;video/vivo;video/vnd.divx;video/vnd.mpegurl;video/vnd.rn-realvideo;application/vnd.rn-realmedia;video/vnd.vivo;video/webm;video/x-anim;video/x-avi;video/x-flc;video/x-fli;video/x-flic;video/x-m4v;video/x-mpeg;video/x-mpeg2;video/x-nsv;video/x-ogm+ogg;video/x-theora+ogg\n",
      "[Thumbnailer Entry]\nTryExec=/usr/bin/evince-thumbnailer\nExec=/usr/bin/evince-thumbnailer -s %s %u %o\nMimeType=application/pdf;application/x-bzpdf;application/x-gzpdf;application/x-xzpdf;application/x-ext-pdf;\n",
      "[Thumbnailer Entry]\nTryExec=/usr/bin/gdk-pixbuf-thumbnailer\nExec=/usr/bin/gdk-pixbuf-thumbnailer -s %s %u %o\nMimeType=image/svg+xml;image/svg+xml-compressed;\n",
      "[Thumbnailer Entry]\nTryExec=/usr/bin/gnome-thumbnail-font\nExec=/usr/bin/gnome-thumbnail-font --size %s %u %o\nMimeType=application/x-font-ttf;application/x-font-pcf;application/x-font-type1;application/x-font-otf;font/ttf;font/otf;\n",
    ]
    for text in shipped {
      let entry = try Self.parse(text)
      #expect(!entry.mimeTypes.isEmpty)
      #expect(entry.arguments.contains { $0.contains("%o") })
    }
    for folder in InstalledThumbnailers.folders(environment: ProcessInfo.processInfo.environment) {
      for name in (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
      where name.hasSuffix(".thumbnailer") {
        let bytes = [UInt8](FileManager.default.contents(atPath: folder + "/" + name) ?? Data())
        #expect(throws: Never.self, "\(folder)/\(name)") {
          try ThumbnailerEntry.parse(bytes, source: name)
        }
      }
    }
  }

  @Test("Exec becomes arguments, never a shell line: each value stays one argument")
  func expansion() throws {
    let entry = try Self.parse(
      "[Thumbnailer Entry]\nExec=/usr/bin/tool \"--title=a b\" -s %s 100%% %u %o\nMimeType=Image/X-Test;\n"
    )
    #expect(entry.mimeTypes == ["image/x-test"])
    let input = "/thumbd/in put;$(rm -rf ~).png"
    let arguments = entry.expand(input: input, output: "/thumbd/out/thumbnail.png", size: 256)
    #expect(
      arguments == [
        "/usr/bin/tool", "--title=a b", "-s", "256", "100%",
        "file:///thumbd/in%20put%3B$(rm%20-rf%20~).png", "/thumbd/out/thumbnail.png",
      ])
    let escaped = try Self.parse(
      "[Thumbnailer Entry]\nExec=tool \"a\\\\\\\\b \\\\\"q\\\\\"\" %i %o\nMimeType=a/b\n")
    #expect(escaped.arguments == ["tool", "a\\b \"q\"", "%i", "%o"])
  }

  @Test(
    "entries that are not what they claim are refused whole",
    arguments: [
      ("no group", "Exec=tool %i %o\nMimeType=a/b\n"),
      ("no output", "[Thumbnailer Entry]\nExec=tool %i\nMimeType=a/b\n"),
      ("no input", "[Thumbnailer Entry]\nExec=tool %o\nMimeType=a/b\n"),
      ("unknown code", "[Thumbnailer Entry]\nExec=tool %f %i %o\nMimeType=a/b\n"),
      ("a lone percent", "[Thumbnailer Entry]\nExec=tool %i %o %\nMimeType=a/b\n"),
      ("a shell's pipe", "[Thumbnailer Entry]\nExec=tool %i %o | sh\nMimeType=a/b\n"),
      ("a substitution", "[Thumbnailer Entry]\nExec=tool $(id) %i %o\nMimeType=a/b\n"),
      ("a semicolon", "[Thumbnailer Entry]\nExec=tool %i %o; rm x\nMimeType=a/b\n"),
      ("an open quote", "[Thumbnailer Entry]\nExec=tool \"%i %o\nMimeType=a/b\n"),
      ("a key twice", "[Thumbnailer Entry]\nExec=tool %i %o\nExec=other %i %o\nMimeType=a/b\n"),
      ("the group twice", "[Thumbnailer Entry]\nExec=a %i %o\n[Thumbnailer Entry]\nMimeType=a/b\n"),
      ("a bad type", "[Thumbnailer Entry]\nExec=tool %i %o\nMimeType=image;\n"),
      ("a type with spaces", "[Thumbnailer Entry]\nExec=tool %i %o\nMimeType=image/a b\n"),
      ("no types", "[Thumbnailer Entry]\nExec=tool %i %o\nMimeType=;;\n"),
      ("a stray line", "[Thumbnailer Entry]\nExec=tool %i %o\nMimeType=a/b\ngarbage\n"),
      ("an unknown escape", "[Thumbnailer Entry]\nExec=tool\\x %i %o\nMimeType=a/b\n"),
      ("a control character", "[Thumbnailer Entry]\nExec=tool\u{1} %i %o\nMimeType=a/b\n"),
      ("a program that is a code", "[Thumbnailer Entry]\nExec=%i %o\nMimeType=a/b\n"),
    ])
  func refusals(_ name: String, _ text: String) {
    #expect(throws: ThumbnailerEntry.Refusal.self, "\(name)") { try Self.parse(text) }
  }

  @Test("limits: size, arguments and types are bounded; bytes that are not UTF-8 are refused")
  func limits() {
    let long =
      "[Thumbnailer Entry]\nExec=tool %i %o\nMimeType="
      + String(repeating: "a/b;", count: ThumbnailerEntry.maxBytes / 4) + "\n"
    #expect(throws: ThumbnailerEntry.Refusal.self) { try Self.parse(long) }
    let many =
      "[Thumbnailer Entry]\nExec=tool %i %o" + String(repeating: " x", count: 100)
      + "\nMimeType=a/b\n"
    #expect(throws: ThumbnailerEntry.Refusal.self) { try Self.parse(many) }
    let types =
      "[Thumbnailer Entry]\nExec=tool %i %o\nMimeType="
      + (0..<600).map { "a/t\($0)" }.joined(separator: ";") + "\n"
    #expect(throws: ThumbnailerEntry.Refusal.self) { try Self.parse(types) }
    #expect(throws: ThumbnailerEntry.Refusal.self) {
      try ThumbnailerEntry.parse(
        Array("[Thumbnailer Entry]\nExec=t\u{FF} %i %o\n".utf8) + [0xFF], source: "x")
    }
    // Other groups and localised keys are read past.
    #expect(throws: Never.self) {
      try Self.parse(
        "# comment\n[Desktop Entry]\nExec=ignored\n[Thumbnailer Entry]\nName[de]=x\nExec=t %i %o\r\nMimeType=a/b\n"
      )
    }
  }

  @Test(
    "per MIME type the first folder wins, then name order; missing, outside /usr and thumbd's own are skipped"
  )
  func precedence() throws {
    let root = TestDaemon.makeDirectory()
    defer { try? FileManager.default.removeItem(atPath: root) }
    let first = root + "/home/thumbnailers"
    let second = root + "/system/thumbnailers"
    for folder in [first, second] {
      try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    }
    // A program outside /usr: installed, but the sandbox would not show it.
    let outside = root + "/tool"
    try "#!/bin/sh\n".write(toFile: outside, atomically: false, encoding: .utf8)
    chmod(outside, 0o755)
    func write(
      _ folder: String, _ name: String, _ exec: String, _ types: String, tryExec: String? = nil
    ) throws {
      let text =
        "[Thumbnailer Entry]\n" + (tryExec.map { "TryExec=\($0)\n" } ?? "")
        + "Exec=\(exec)\nMimeType=\(types)\n"
      try text.write(toFile: folder + "/" + name, atomically: false, encoding: .utf8)
    }
    try write(first, "b.thumbnailer", "/usr/bin/true %i %o", "x/one;x/two")
    try write(first, "a.thumbnailer", "true %i %o", "x/two;x/three")
    try write(first, "c.thumbnailer", "/usr/bin/no-such-program %i %o", "x/four")
    try write(first, "d.thumbnailer", "/usr/bin/true %i %o", "x/five", tryExec: "no-such-program")
    try write(first, "e.thumbnailer", "\(outside) %i %o", "x/six")
    // Standing in for thumbd's own entry: the program the isOwn below names.
    try write(first, "f.thumbnailer", "sh %i %o", "x/seven")
    try write(first, "g.thumbnailer", "broken", "x/eight")
    try write(second, "a.thumbnailer", "/usr/bin/env %i %o", "x/one;x/four;x/nine")
    let installed = InstalledThumbnailers.load(
      folders: [first, second, root + "/missing"],
      isOwn: { $0 == "/usr/bin/dash" || $0.hasSuffix("/bash") || $0.hasSuffix("/sh") })
    #expect(installed.byType["x/one"]?.entry.source == first + "/b.thumbnailer")
    #expect(installed.byType["x/two"]?.entry.source == first + "/a.thumbnailer")
    #expect(installed.byType["x/two"]?.entry.program.hasPrefix("/") == true)
    #expect(installed.byType["x/three"]?.entry.source == first + "/a.thumbnailer")
    #expect(installed.byType["x/four"]?.entry.source == second + "/a.thumbnailer")
    #expect(installed.byType["x/nine"] != nil)
    for absent in ["x/five", "x/six", "x/seven", "x/eight"] {
      #expect(installed.byType[absent] == nil)
    }
    var reasons: [String: String] = [:]
    for (source, reason) in installed.skipped where reasons[source] == nil {
      reasons[source] = reason
    }
    #expect(reasons[first + "/c.thumbnailer"]?.contains("not installed") == true)
    #expect(reasons[first + "/d.thumbnailer"]?.contains("TryExec") == true)
    #expect(reasons[first + "/e.thumbnailer"]?.contains("outside /usr") == true)
    #expect(reasons[first + "/f.thumbnailer"] == "thumbd's own entry")
    #expect(reasons[first + "/g.thumbnailer"]?.contains("Exec") == true)
  }

  @Test("the folders follow the XDG Base Directory Specification")
  func folders() {
    #expect(
      InstalledThumbnailers.folders(environment: ["HOME": "/home/u"])
        == [
          "/home/u/.local/share/thumbnailers", "/usr/local/share/thumbnailers",
          "/usr/share/thumbnailers",
        ])
    #expect(
      InstalledThumbnailers.folders(
        environment: ["HOME": "/home/u", "XDG_DATA_HOME": "/d", "XDG_DATA_DIRS": "/a/:relative:/b"])
        == ["/d/thumbnailers", "/a/thumbnailers", "/b/thumbnailers"])
  }
}

/// A file's MIME type from its name, for `thumbd desktop` (issue 53).
@Suite("MIME types from names")
struct MediaTypeGlobsTests {
  @Test(
    "the highest weight wins, then the longest pattern; case matters only where a pattern says cs")
  func globs() {
    var globs = MediaTypeGlobs()
    globs.add(
      """
      # comment
      50:image/bmp:*.bmp
      50:application/x-compressed-tar:*.tar.gz
      50:application/gzip:*.gz
      60:text/x-makefile:Makefile:cs
      50:text/x-c:*.C:cs
      50:text/x-csrc:*.c
      40:video/x-matroska:*.mkv
      55:video/webm:*.mkv
      50:image/x-weird:*.[ab]c
      broken line
      900:image/too-heavy:*.heavy
      """)
    #expect(globs.type(ofName: "scan.BMP") == "image/bmp")
    #expect(globs.type(ofName: "a.tar.gz") == "application/x-compressed-tar")
    #expect(globs.type(ofName: "a.gz") == "application/gzip")
    #expect(globs.type(ofName: "Makefile") == "text/x-makefile")
    #expect(globs.type(ofName: "makefile") == nil)
    #expect(globs.type(ofName: "x.C") == "text/x-c")
    #expect(globs.type(ofName: "x.c") == "text/x-csrc")
    #expect(globs.type(ofName: "clip.mkv") == "video/webm")
    #expect(globs.type(ofName: "x.ac") == nil)
    #expect(globs.type(ofName: "x.heavy") == nil)
    #expect(globs.type(ofName: "noextension") == nil)
  }

  @Test("this machine's database names the types the installed entries claim")
  func installedDatabase() {
    let globs = MediaTypeGlobs.load(environment: ["HOME": "/nonexistent"])
    #expect(globs.type(ofName: "x.bmp") == "image/bmp")
    #expect(globs.type(ofName: "x.tiff") == "image/tiff")
    #expect(globs.type(ofName: "x.svg") == "image/svg+xml")
  }
}
