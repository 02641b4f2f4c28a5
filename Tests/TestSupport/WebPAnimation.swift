import CLibWebPDemux

/// What libwebp's own demuxer reads from a WebP (never thumbd's code): its canvas, each
/// frame's duration, and its loop count. For checking animated output.
struct WebPAnimation {
  var width = 0
  var height = 0
  var loop = -1
  var durations: [Int] = []

  /// The WebP `bytes` as the demuxer reads them, or nil when it refuses them.
  static func read(_ bytes: [UInt8]) -> WebPAnimation? {
    bytes.withUnsafeBufferPointer { buffer -> WebPAnimation? in
      var data = WebPData(bytes: buffer.baseAddress, size: buffer.count)
      guard let demux = WebPDemuxInternal(&data, 0, nil, Int32(WEBP_DEMUX_ABI_VERSION)) else {
        return nil
      }
      defer { WebPDemuxDelete(demux) }
      var read = WebPAnimation()
      read.width = Int(WebPDemuxGetI(demux, WEBP_FF_CANVAS_WIDTH))
      read.height = Int(WebPDemuxGetI(demux, WEBP_FF_CANVAS_HEIGHT))
      read.loop = Int(WebPDemuxGetI(demux, WEBP_FF_LOOP_COUNT))
      var iterator = WebPIterator()
      if WebPDemuxGetFrame(demux, 1, &iterator) != 0 {
        repeat {
          read.durations.append(Int(iterator.duration))
        } while WebPDemuxNextFrame(&iterator) != 0
        WebPDemuxReleaseIterator(&iterator)
      }
      return read
    }
  }
}
