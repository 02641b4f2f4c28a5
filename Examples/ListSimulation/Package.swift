// swift-tools-version:6.0
import PackageDescription

// thumbd as any consumer takes it: by URL and version. CI points THUMBD_PACKAGE_URL at a local
// bare clone with a version tag (scripts/check-examples); otherwise the published repository.
let thumbd = Context.environment["THUMBD_PACKAGE_URL"] ?? "https://github.com/thumbd/thumbd.git"

let package = Package(
  name: "ListSimulation",
  platforms: [.macOS(.v15)],
  dependencies: [.package(url: thumbd, from: "0.9.0")],
  targets: [
    .executableTarget(
      name: "ListSimulation",
      dependencies: [.product(name: "ImagePipeline", package: "thumbd")])
  ],
  swiftLanguageModes: [.v6]
)
