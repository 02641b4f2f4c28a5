import ThumbSystem

/// How a simulated user scrolls: flings that decay, slow drags, pauses, and reversals, drawn
/// from a seeded generator so a run can be repeated exactly.
struct ScrollProfile {
  enum Phase {
    case fling
    case drag(until: Double)
    case pause(until: Double)
  }

  /// Items per second, signed.
  private(set) var velocity = 0.0
  private var direction = 1.0
  private var phase = Phase.pause(until: 0)
  private var random: SeededRandom
  /// Steady scrolling at `steadySpeed` items per second instead of flings (soak).
  let steadySpeed: Double?

  init(seed: UInt64, steadySpeed: Double? = nil) {
    random = SeededRandom(seed: seed)
    self.steadySpeed = steadySpeed
  }

  /// Advances the profile by `dt` seconds at time `now`; `atEdge` reverses the direction.
  mutating func advance(now: Double, dt: Double, atEdge: Bool) {
    if atEdge {
      direction = -direction
      velocity = -velocity
    }
    if let steadySpeed {
      velocity = direction * steadySpeed
      return
    }
    switch phase {
    case .fling:
      velocity *= _exp(-dt / 0.7)
      if abs(velocity) < 1 { nextPhase(now: now) }
    case .drag(let until):
      if now >= until { nextPhase(now: now) }
    case .pause(let until):
      velocity = 0
      if now >= until { nextPhase(now: now) }
    }
  }

  private mutating func nextPhase(now: Double) {
    if random.unit() < 0.2 { direction = -direction }
    let roll = random.unit()
    if roll < 0.45 {
      phase = .fling
      velocity = direction * (15 + random.unit() * 45)
    } else if roll < 0.8 {
      phase = .drag(until: now + 0.5 + random.unit() * 1.5)
      velocity = direction * (2 + random.unit() * 6)
    } else {
      phase = .pause(until: now + 0.3 + random.unit() * 1.2)
      velocity = 0
    }
  }
}

#if canImport(Glibc)
  import Glibc
  @inline(__always) func _exp(_ x: Double) -> Double { Glibc.exp(x) }
#endif
