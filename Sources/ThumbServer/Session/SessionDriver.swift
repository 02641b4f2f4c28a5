import ImagePipeline
import ThumbProtocol

/// Runs a `SessionState`'s effects against a `SessionWork` and hands back the messages to
/// send. The daemon's session handler and thumbload's library target both drive sessions
/// through this, on one serial context each (the event loop; a lock).
public final class SessionDriver {
  private var state: SessionState
  private let work: any SessionWork

  init(state: SessionState, work: any SessionWork) {
    self.state = state
    self.work = work
  }

  /// A session over `pipeline` for `client`, with `parameters`' defaults and announced items
  /// counted in `memory`. `report` carries each finished piece of work back to the owner's
  /// serial context, where the owner calls `finished`.
  public convenience init(
    pipeline: ThumbnailPipeline, client: ClientID, parameters: ThumbnailParameters,
    memory: SessionMemory, report: @escaping @Sendable (FinishedWork) -> Void
  ) {
    self.init(
      state: SessionState(parameters: parameters, memory: memory),
      work: PipelineSessionWork(pipeline: pipeline, client: client, report: report))
  }

  /// Loads and prefetch items not answered yet.
  public var pendingWork: Int { state.pendingWork }

  /// Applies a client message; returns the messages to send at once.
  public func apply(_ message: ClientMessage) -> [ServerMessage] { run(state.apply(message)) }

  /// Answers a message that broke a rule (`refused`, for `why`) where it points; returns the
  /// messages to send at once. The session goes on.
  public func refuse(_ refused: RefusedMessage, because why: String) -> [ServerMessage] {
    run(state.refuse(refused, because: why))
  }

  /// A piece of work came back: the message to send, if its binding still wants it.
  public func finished(_ done: FinishedWork) -> [ServerMessage] {
    if done.outcome.isFinal { work.forget(done.work) }
    return run(state.finished(done.work, done.purpose, done.outcome))
  }

  /// The connection closed: every piece of work is given up.
  public func close() { _ = run(state.close()) }

  private func run(_ effects: [SessionState.Effect]) -> [ServerMessage] {
    var messages: [ServerMessage] = []
    for effect in effects {
      switch effect {
      case .start(let id, let request, let priority, let purpose, let preview):
        // A memory hit is answered here, like a placeholder known at once.
        if let outcome = work.start(id, request, priority, purpose, preview: preview) {
          messages += run(state.finished(id, purpose, outcome))
        }
      case .findPlaceholder(let id, let request, let purpose):
        // Known in memory: answered here, before anything else. Otherwise the work looks
        // further (the disk) and reports it like an outcome, if it finds one.
        if let found = work.placeholder(id, request, purpose) {
          messages += run(state.finished(id, purpose, found))
        }
      case .cancel(let id): work.cancel(id)
      case .setPriority(let id, let priority): work.setPriority(id, priority)
      case .send(let message): messages.append(message)
      case .staleDrop: work.countStaleDrop()
      }
    }
    return messages
  }
}

/// A session's finished piece of work on its way back to the session's serial context.
public struct FinishedWork: Sendable {
  let work: SessionState.WorkID
  let purpose: SessionState.Purpose
  let outcome: SessionState.Outcome
}
