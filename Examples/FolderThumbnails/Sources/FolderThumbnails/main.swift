import Foundation
import ImagePipeline

// folder-thumbnails DIR OUT [SIZE]: a thumbnail of every image in DIR, written to OUT, through
// ImagePipeline (its file loader confined to DIR, its decode threads, its memory budget).

let arguments = CommandLine.arguments
guard arguments.count >= 3 else {
  FileHandle.standardError.write(Data("usage: folder-thumbnails DIR OUT [SIZE]\n".utf8))
  exit(2)
}
let directory = URL(fileURLWithPath: arguments[1]).standardizedFileURL
let output = URL(fileURLWithPath: arguments[2])
let size = arguments.count > 3 ? Int(arguments[3]) ?? 256 : 256
// Checked once, before any work: a size out of range stops here with its reason.
let spec = try ValidSpec(ThumbnailSpec(width: size, height: size))
try FileManager.default.createDirectory(at: output, withIntermediateDirectories: true)

// file:// sources only, and only under DIR.
let loader = SourceLoader(
  policy: SourcePolicy(allowedSchemes: ["file"], fileRoots: [directory.path]))
let pipeline = ThumbnailPipeline(configuration: .init(dataLoader: loader))
let files = try FileManager.default.contentsOfDirectory(
  at: directory, includingPropertiesForKeys: [.isRegularFileKey]
).filter { (try? $0.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true }
  .sorted { $0.lastPathComponent < $1.lastPathComponent }

// Every file at once: the pipeline queues the work by priority on its own decode threads.
let results = await withTaskGroup(of: (String, Result<Thumbnail, any Error>).self) { group in
  for file in files {
    group.addTask {
      let request = ImageRequest(url: file.absoluteString, spec: spec)
      do {
        return (
          file.lastPathComponent, .success(try await pipeline.response(for: request).thumbnail)
        )
      } catch {
        return (file.lastPathComponent, .failure(error))
      }
    }
  }
  var results: [(String, Result<Thumbnail, any Error>)] = []
  for await result in group { results.append(result) }
  return results.sorted { $0.0 < $1.0 }
}

var made = 0
for (name, result) in results {
  switch result {
  case .success(let thumbnail):
    let target = output.appendingPathComponent(name + "." + thumbnail.format.rawValue)
    try Data(thumbnail.data).write(to: target)
    print("\(name): \(thumbnail.width)x\(thumbnail.height) \(thumbnail.format.rawValue)")
    made += 1
  case .failure(let error):
    print("\(name): not an image we can read (\(error))")
  }
}
print("folder-thumbnails: \(made) of \(results.count) files")
exit(made > 0 ? 0 : 1)
