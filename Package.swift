// swift-tools-version:6.0
import PackageDescription

/// A system library found through pkg-config, installed from Debian's `-dev` package: when it
/// is missing, SwiftPM's own message names the pkg-config module and the package to install.
/// Each one's module map (Sources/SystemLibraries/NAME) names the library to link.
func systemLibrary(_ name: String, pkgConfig: String, apt: String) -> Target {
  .systemLibrary(
    name: name, path: "Sources/SystemLibraries/\(name)", pkgConfig: pkgConfig,
    providers: [.apt([apt])])
}

/// The image codecs CImageCodecs is written over.
let codecLibraries: [Target.Dependency] = [
  "CLibJPEG", "CLibPNG", "CZlib", "CLibWebP", "CLibWebPDemux", "CLibWebPMux", "CGIF", "CLCMS2",
  "CLibTIFF",
]

// No target uses unsafe flags, so the library products can be depended on by version.
// Warnings are errors and C is optimised in debug builds through the command line instead:
// scripts/flags holds the flags every script builds with (docs/PACKAGE.md).
let package = Package(
  name: "thumbd",
  platforms: [.macOS(.v15)],
  products: [
    .library(name: "ImagePipeline", targets: ["ImagePipeline"]),
    .library(name: "ThumbProtocol", targets: ["ThumbProtocol"]),
    .library(name: "ThumbClient", targets: ["ThumbClient"]),
    .executable(name: "thumbd", targets: ["thumbd"]),
    .executable(name: "thumbload", targets: ["thumbload"]),
    .executable(name: "thumbd-frame", targets: ["thumbd-frame"]),
  ],
  targets: [
    systemLibrary("CLibJPEG", pkgConfig: "libjpeg", apt: "libjpeg62-turbo-dev"),
    systemLibrary("CLibPNG", pkgConfig: "libpng16", apt: "libpng-dev"),
    systemLibrary("CZlib", pkgConfig: "zlib", apt: "zlib1g-dev"),
    systemLibrary("CLibWebP", pkgConfig: "libwebp", apt: "libwebp-dev"),
    systemLibrary("CLibWebPDemux", pkgConfig: "libwebpdemux", apt: "libwebp-dev"),
    systemLibrary("CLibWebPMux", pkgConfig: "libwebpmux", apt: "libwebp-dev"),
    systemLibrary("CGIF", pkgConfig: "libgif", apt: "libgif-dev"),
    systemLibrary("CLCMS2", pkgConfig: "lcms2", apt: "liblcms2-dev"),
    systemLibrary("CLibTIFF", pkgConfig: "libtiff-4", apt: "libtiff-dev"),
    .target(
      name: "CImageCodecs",
      dependencies: codecLibraries + ["CSystem"],
      linkerSettings: [.linkedLibrary("m")]
    ),
    .target(
      name: "ImagePipeline",
      dependencies: ["CImageCodecs", "CCurl", "CSystem", "ThumbSystem", "ThumbWire"]
    ),
    // libcurl is opened with dlopen on first use, never linked: see include/CCurl.h. So are
    // libheif (CImageCodecs/heif_api.h), libavcodec and libsystemd (CBus/bus.c): their
    // headers come from the system's include path.
    .target(name: "CCurl", dependencies: ["CSystem"]),
    .target(name: "CBus", dependencies: ["CSystem"]),
    .target(name: "CSystem"),
    // What thumbd asks of the system: threads, files, clocks.
    .target(
      name: "ThumbSystem",
      dependencies: ["CSystem", "ThumbWire"]
    ),
    // What goes over the wire: HTTP grammar, response heads, percent-encoding, digests
    // (SHA-256, MD5, FNV-1a). Pure Swift, no system calls.
    .target(name: "ThumbWire"),
    // Programs from outside thumbd (installed thumbnailers, thumbd's video worker) in a
    // bubblewrap sandbox.
    .target(
      name: "Sandbox",
      dependencies: ["CSystem", "ThumbSystem", "ThumbWire", "ImagePipeline"]
    ),
    .target(
      name: "ThumbProtocol"
    ),
    .target(
      name: "ThumbClient",
      dependencies: ["ThumbProtocol", "CSystem", "ThumbSystem", "ThumbWire"]
    ),
    .target(
      name: "ThumbServer",
      dependencies: [
        "ImagePipeline", "ThumbProtocol", "CBus", "CSystem", "ThumbSystem", "ThumbWire", "Sandbox",
      ]
    ),
    // The video worker thumbd runs in its sandbox: C only, so it needs nothing the sandbox
    // does not show (FFmpeg's libraries are opened with dlopen from /usr).
    .executableTarget(
      name: "thumbd-frame",
      dependencies: ["CSystem"],
      linkerSettings: [.linkedLibrary("m")]
    ),
    .executableTarget(
      name: "thumbd",
      dependencies: [
        "ImagePipeline", "ThumbServer", "ThumbClient", "ThumbSystem", "ThumbWire", "Sandbox",
      ]
    ),
    // The loopback origin and the blocking client that the tests and thumbload share.
    .target(
      name: "Loopback",
      dependencies: ["CSystem", "ThumbSystem", "ThumbWire"]
    ),
    .target(
      name: "LoadHarness",
      dependencies: [
        "ImagePipeline", "ThumbProtocol", "ThumbServer", "ThumbClient", "CSystem", "ThumbSystem",
        "ThumbWire",
        "Loopback",
      ]
    ),
    .executableTarget(
      name: "thumbload",
      dependencies: ["LoadHarness"]
    ),
    .target(
      name: "FuzzTargets",
      dependencies: ["ImagePipeline", "ThumbServer", "ThumbProtocol", "Sandbox", "ThumbWire"]
    ),
    .executableTarget(
      name: "thumbfuzz",
      dependencies: ["FuzzTargets", "ThumbSystem", "ThumbWire"]
    ),
    .executableTarget(
      name: "pipeline-bench",
      dependencies: ["ImagePipeline"],
      path: "bench/PipelineBench"
    ),
    // A job server whose jobs attack it (FrameServerTests); a test program, never installed.
    .executableTarget(
      name: "thumbd-hostile-server",
      dependencies: ["CSystem"],
      path: "Tests/HostileJobServer"
    ),
    .target(
      name: "TestSupport",
      dependencies: [
        "ImagePipeline", "CSystem", "ThumbSystem", "ThumbWire", "Loopback", "CLibWebPDemux",
        "ThumbServer",
      ],
      path: "Tests/TestSupport"
    ),
    .testTarget(
      name: "ThumbProtocolTests",
      dependencies: ["ThumbProtocol", "TestSupport"]
    ),
    .testTarget(
      name: "ImagePipelineTests",
      dependencies: [
        "ImagePipeline", "CImageCodecs", "CSystem", "ThumbSystem", "ThumbWire", "TestSupport",
      ],
      exclude: ["Fixtures"]
    ),
    .testTarget(
      name: "ThumbServerTests",
      dependencies: [
        "ThumbServer", "ThumbProtocol", "ThumbClient", "ImagePipeline", "LoadHarness", "CSystem",
        "ThumbSystem", "ThumbWire", "TestSupport", "Sandbox",
      ]
    ),
    .testTarget(
      // Suites that start the daemon, thumbload, the CLI or nginx as processes.
      name: "IntegrationTests",
      dependencies: [
        "ImagePipeline", "ThumbServer", "ThumbClient", "LoadHarness", "FuzzTargets", "CSystem",
        "ThumbSystem", "ThumbWire", "TestSupport",
      ]
    ),
  ],
  swiftLanguageModes: [.v6],
  cLanguageStandard: .gnu11
)
