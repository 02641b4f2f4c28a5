// swift-tools-version:6.0
import PackageDescription

/// Warnings are errors everywhere: a warning left alone today hides the next one.
let strictSwift: [SwiftSetting] = [.unsafeFlags(["-warnings-as-errors"])]

let package = Package(
  name: "thumbd",
  platforms: [.macOS(.v15)],
  products: [
    .library(name: "ImagePipeline", targets: ["ImagePipeline"]),
    .library(name: "ThumbProtocol", targets: ["ThumbProtocol"]),
    .library(name: "ThumbClient", targets: ["ThumbClient"]),
    .executable(name: "thumbd", targets: ["thumbd"]),
    .executable(name: "thumbload", targets: ["thumbload"]),
  ],
  targets: [
    .target(
      name: "CImageCodecs",
      cSettings: [
        // The resampler's inner loops need the optimiser even in debug
        // builds, or the corpus tests crawl.
        .unsafeFlags(["-O2", "-Wall", "-Wextra", "-Werror", "-std=gnu11"])
      ],
      linkerSettings: [
        .linkedLibrary("jpeg"), .linkedLibrary("png16"), .linkedLibrary("z"),
        .linkedLibrary("webp"), .linkedLibrary("webpdemux"), .linkedLibrary("gif"),
        .linkedLibrary("heif"), .linkedLibrary("webpmux"), .linkedLibrary("lcms2"),
        .linkedLibrary("m"),
      ]
    ),
    .target(
      name: "ImagePipeline",
      dependencies: ["CImageCodecs", "CCurl", "CSystem", "ThumbSystem"],
      // Generic caches and stages are used from other modules (thumbd, benchmarks); without
      // cross-module optimisation every call there goes through runtime generic metadata.
      swiftSettings: strictSwift + [
        .unsafeFlags(["-cross-module-optimization"], .when(configuration: .release))
      ]
    ),
    .target(
      name: "CCurl",
      // libcurl is opened with dlopen on first use, never linked: see include/CCurl.h.
      cSettings: [.unsafeFlags(["-O2", "-Wall", "-Wextra", "-Werror", "-std=gnu11"])]
    ),
    .target(
      name: "CBus",
      cSettings: [.unsafeFlags(["-O2", "-Wall", "-Wextra", "-Werror", "-std=gnu11"])],
      linkerSettings: [.linkedLibrary("systemd")]
    ),
    .target(
      name: "CSystem",
      cSettings: [.unsafeFlags(["-O2", "-Wall", "-Wextra", "-Werror", "-std=gnu11"])]
    ),
    .target(
      name: "ThumbSystem",
      dependencies: ["CSystem"],
      swiftSettings: strictSwift
    ),
    .target(
      name: "ThumbProtocol",
      swiftSettings: strictSwift
    ),
    .target(
      name: "ThumbClient",
      dependencies: ["ThumbProtocol", "CSystem", "ThumbSystem"],
      swiftSettings: strictSwift
    ),
    .target(
      name: "ThumbServer",
      dependencies: ["ImagePipeline", "ThumbProtocol", "CBus", "CSystem", "ThumbSystem"],
      swiftSettings: strictSwift
    ),
    .executableTarget(
      name: "thumbd",
      dependencies: ["ImagePipeline", "ThumbServer", "ThumbClient", "ThumbSystem"],
      swiftSettings: strictSwift
    ),
    .target(
      name: "LoadHarness",
      dependencies: [
        "ImagePipeline", "ThumbProtocol", "ThumbServer", "ThumbClient", "CSystem", "ThumbSystem",
      ],
      swiftSettings: strictSwift
    ),
    .executableTarget(
      name: "thumbload",
      dependencies: ["LoadHarness"],
      swiftSettings: strictSwift
    ),
    .target(
      name: "FuzzTargets",
      dependencies: ["ImagePipeline", "ThumbServer", "ThumbProtocol"],
      swiftSettings: strictSwift
    ),
    .executableTarget(
      name: "thumbfuzz",
      dependencies: ["FuzzTargets", "ThumbSystem"],
      swiftSettings: strictSwift
    ),
    .executableTarget(
      name: "pipeline-bench",
      dependencies: ["ImagePipeline"],
      path: "bench/PipelineBench",
      swiftSettings: strictSwift
    ),
    .target(
      name: "TestSupport",
      dependencies: ["ImagePipeline", "CSystem", "ThumbSystem"],
      path: "Tests/TestSupport",
      swiftSettings: strictSwift
    ),
    .testTarget(
      name: "ThumbProtocolTests",
      dependencies: ["ThumbProtocol", "TestSupport"],
      swiftSettings: strictSwift
    ),
    .testTarget(
      name: "ImagePipelineTests",
      dependencies: ["ImagePipeline", "CImageCodecs", "CSystem", "ThumbSystem", "TestSupport"],
      exclude: ["Fixtures"],
      swiftSettings: strictSwift
    ),
    .testTarget(
      name: "ThumbServerTests",
      dependencies: [
        "ThumbServer", "ThumbProtocol", "ThumbClient", "ImagePipeline", "LoadHarness", "CSystem",
        "ThumbSystem", "TestSupport",
      ],
      swiftSettings: strictSwift
    ),
    .testTarget(
      // Suites that start the daemon, thumbload, the CLI or nginx as processes.
      name: "IntegrationTests",
      dependencies: [
        "ImagePipeline", "ThumbServer", "ThumbClient", "LoadHarness", "FuzzTargets", "CSystem",
        "ThumbSystem", "TestSupport",
      ],
      swiftSettings: strictSwift
    ),
  ],
  swiftLanguageModes: [.v6]
)
