import Synchronization

/// A thread-safe LRU cache bounded by total cost (bytes) and entry count.
///
/// Lookups, insertions and removals are O(1): entries live in an array-backed doubly linked
/// list (most recent at the head) indexed by a dictionary. Not NSCache, whose eviction order is
/// unspecified. An entry costing more than `maxEntryFraction` of the cost limit is not stored,
/// so one huge value can never flush the whole cache. With a `Grouping`, each group (all
/// thumbnails of one source) holds at most `limit` entries: a new one beyond it sends the
/// group's oldest out first, so no one source can fill the cache with variants.
public final class MemoryCache<Key: Hashable & Sendable, Value: Sendable>: Sendable {
  /// Point-in-time totals.
  public struct Statistics: Sendable, Hashable {
    /// Entries held.
    public var count: Int
    /// Sum of their costs.
    public var totalCost: Int
    /// Entries evicted to respect the limits since creation.
    public var evictions: Int
    /// Values looked up (`value(forKey:)`, `peek`) since creation, found or not.
    public var lookups: Int
  }

  /// Which group a key belongs to, and how many entries a group may hold.
  public struct Grouping: Sendable {
    /// Entries a group may hold; at least 1.
    public let limit: Int
    /// The key's group; nil for a key in none.
    public let group: @Sendable (Key) -> String?

    /// Groups by `group`, at most `limit` entries each.
    public init(limit: Int, group: @escaping @Sendable (Key) -> String?) {
      self.limit = max(1, limit)
      self.group = group
    }
  }

  private struct Node {
    var key: Key
    var value: Value
    var cost: Int
    var previous: Int
    var next: Int
  }

  private struct State {
    var index: [Key: Int] = [:]
    var nodes: [Node?] = []
    var free: [Int] = []
    var head = -1
    var tail = -1
    var totalCost = 0
    var evictions = 0
    var lookups = 0
    /// Entries gone so far, for any reason.
    var removals: UInt64 = 0
    /// Each group's keys, oldest first (only with a grouping).
    var groups: [String: [Key]] = [:]
    let grouping: Grouping?
  }

  /// Largest total cost held after any call returns.
  public let costLimit: Int
  /// Largest number of entries held after any call returns.
  public let countLimit: Int
  /// Largest single entry, as a fraction of `costLimit`.
  public let maxEntryFraction: Double
  private let state: Mutex<State>
  /// `State.removals` as of the last change, readable without the lock.
  private let published = Atomic<UInt64>(0)

  /// Creates a cache. `maxEntryFraction` defaults to a tenth of the cost limit; `grouping`
  /// bounds the entries of each group.
  public init(
    costLimit: Int, countLimit: Int, maxEntryFraction: Double = 0.1, grouping: Grouping? = nil
  ) {
    precondition(costLimit >= 0 && countLimit >= 0, "limits must not be negative")
    self.costLimit = costLimit
    self.countLimit = countLimit
    self.maxEntryFraction = maxEntryFraction
    state = Mutex(State(grouping: grouping))
  }

  /// Entries that have left the cache so far, evicted, replaced or removed: when two reads
  /// give the same number, every entry present before the first was present throughout. One
  /// atomic read, no lock.
  public var removals: UInt64 { published.load(ordering: .acquiring) }

  /// Runs `body` under the lock, then publishes the removals it made.
  private func changing<R>(_ body: (inout State) -> R) -> R {
    state.withLock { state in
      let result = body(&state)
      published.store(state.removals, ordering: .releasing)
      return result
    }
  }

  /// The value for `key`, marking it most recently used.
  public func value(forKey key: Key) -> Value? {
    state.withLock { state in
      state.lookups += 1
      guard let slot = state.index[key] else { return nil }
      Self.moveToHead(slot, in: &state)
      return state.nodes[slot]!.value
    }
  }

  /// The value for `key` without touching its recency.
  public func peek(_ key: Key) -> Value? {
    state.withLock { state in
      state.lookups += 1
      return state.index[key].map { state.nodes[$0]!.value }
    }
  }

  /// Whether `key` is present, without touching its recency.
  public func contains(_ key: Key) -> Bool {
    state.withLock { $0.index[key] != nil }
  }

  /// Stores `value`, evicting least recently used entries to respect the limits.
  /// Returns false (and removes any older value) when the entry alone is too costly.
  @discardableResult
  public func setValue(_ value: Value, forKey key: Key, cost: Int) -> Bool {
    insert(value, forKey: key, cost: cost).stored
  }

  /// Stores like `setValue` and also reports which keys were evicted (or replaced and refused),
  /// for owners that keep something outside the cache per key (the disk cache's files).
  func insert(_ value: Value, forKey key: Key, cost: Int) -> (stored: Bool, evicted: [Key]) {
    let fits = cost >= 0 && Double(cost) <= Double(costLimit) * maxEntryFraction && countLimit > 0
    return changing { state in
      if let slot = state.index[key] { Self.remove(slot, in: &state) }
      guard fits else { return (false, []) }
      var evicted: [Key] = []
      if let grouping = state.grouping, let group = grouping.group(key) {
        // The group's oldest make room first.
        while let members = state.groups[group], members.count >= grouping.limit {
          guard let slot = state.index[members[0]] else {
            state.groups[group]!.removeFirst()
            continue
          }
          Self.remove(slot, in: &state)
          state.evictions += 1
          evicted.append(members[0])
        }
        state.groups[group, default: []].append(key)
      }
      let node = Node(key: key, value: value, cost: cost, previous: -1, next: state.head)
      let slot: Int
      if let reused = state.free.popLast() {
        slot = reused
        state.nodes[slot] = node
      } else {
        slot = state.nodes.count
        state.nodes.append(node)
      }
      if state.head >= 0 { state.nodes[state.head]!.previous = slot }
      state.head = slot
      if state.tail < 0 { state.tail = slot }
      state.index[key] = slot
      state.totalCost += cost
      return (true, evicted + Self.trim(&state, cost: costLimit, count: countLimit))
    }
  }

  /// Removes the value for `key`, if any.
  public func removeValue(forKey key: Key) {
    changing { state in
      if let slot = state.index[key] { Self.remove(slot, in: &state) }
    }
  }

  /// Evicts least recently used entries until both totals are within the given bounds, and
  /// returns their keys.
  @discardableResult
  public func trim(toCost cost: Int, count: Int? = nil) -> [Key] {
    changing { Self.trim(&$0, cost: cost, count: count ?? countLimit) }
  }

  /// Removes every entry whose key satisfies `predicate` and returns how many went. O(n),
  /// under the lock: for rare events (a source changed or purged), not for every request.
  @discardableResult
  public func removeAll(where predicate: (Key) -> Bool) -> Int {
    changing { state in
      let slots = state.index.filter { predicate($0.key) }.map(\.value)
      for slot in slots { Self.remove(slot, in: &state) }
      return slots.count
    }
  }

  /// Removes everything.
  public func removeAll() {
    changing { state in
      let (evictions, removals) = (state.evictions, state.removals)
      state = State(grouping: state.grouping)
      (state.evictions, state.removals) = (evictions, removals + 1)
    }
  }

  /// Keys from most to least recently used (O(n); for tests and diagnostics).
  public var keysByRecency: [Key] {
    state.withLock { state in
      var keys: [Key] = []
      var slot = state.head
      while slot >= 0 {
        keys.append(state.nodes[slot]!.key)
        slot = state.nodes[slot]!.next
      }
      return keys
    }
  }

  /// Current totals.
  public var statistics: Statistics {
    state.withLock {
      Statistics(
        count: $0.index.count, totalCost: $0.totalCost, evictions: $0.evictions,
        lookups: $0.lookups)
    }
  }

  private static func trim(_ state: inout State, cost: Int, count: Int) -> [Key] {
    var evicted: [Key] = []
    while state.tail >= 0 && (state.totalCost > cost || state.index.count > count) {
      evicted.append(state.nodes[state.tail]!.key)
      remove(state.tail, in: &state)
      state.evictions += 1
    }
    return evicted
  }

  private static func unlink(_ slot: Int, in state: inout State) {
    let node = state.nodes[slot]!
    if node.previous >= 0 {
      state.nodes[node.previous]!.next = node.next
    } else {
      state.head = node.next
    }
    if node.next >= 0 {
      state.nodes[node.next]!.previous = node.previous
    } else {
      state.tail = node.previous
    }
  }

  private static func moveToHead(_ slot: Int, in state: inout State) {
    guard state.head != slot else { return }
    unlink(slot, in: &state)
    state.nodes[slot]!.previous = -1
    state.nodes[slot]!.next = state.head
    if state.head >= 0 { state.nodes[state.head]!.previous = slot }
    state.head = slot
    if state.tail < 0 { state.tail = slot }
  }

  private static func remove(_ slot: Int, in state: inout State) {
    unlink(slot, in: &state)
    let node = state.nodes[slot]!
    state.index[node.key] = nil
    if let group = state.grouping?.group(node.key), var members = state.groups[group],
      let at = members.firstIndex(of: node.key)
    {
      members.remove(at: at)
      state.groups[group] = members.isEmpty ? nil : members
    }
    state.totalCost -= node.cost
    state.nodes[slot] = nil
    state.free.append(slot)
    state.removals += 1
  }
}
