import Testing
import ThumbSystem

@testable import ImagePipeline
@testable import TestSupport

/// LRU order, cost and count limits, against a simple reference model.
@Suite("Memory cache")
struct MemoryCacheTests {
  @Test("least recently used goes first; a read refreshes recency")
  func lruOrder() {
    let cache = MemoryCache<String, Int>(costLimit: 100, countLimit: 3, maxEntryFraction: 1)
    cache.setValue(1, forKey: "a", cost: 1)
    cache.setValue(2, forKey: "b", cost: 1)
    cache.setValue(3, forKey: "c", cost: 1)
    #expect(cache.value(forKey: "a") == 1)
    cache.setValue(4, forKey: "d", cost: 1)
    #expect(cache.keysByRecency == ["d", "a", "c"])
    #expect(cache.value(forKey: "b") == nil)
    #expect(cache.statistics.evictions == 1)
  }

  @Test("removals count every entry that left, for any reason, and nothing else")
  func removals() {
    let cache = MemoryCache<String, Int>(costLimit: 100, countLimit: 3, maxEntryFraction: 1)
    cache.setValue(1, forKey: "a", cost: 1)
    cache.setValue(2, forKey: "b", cost: 1)
    _ = cache.value(forKey: "a")
    _ = cache.peek("b")
    #expect(cache.removals == 0, "inserts and reads remove nothing")
    cache.setValue(3, forKey: "a", cost: 1)
    #expect(cache.removals == 1, "a replaced value left")
    cache.setValue(4, forKey: "c", cost: 1)
    cache.setValue(5, forKey: "d", cost: 1)
    #expect(cache.removals == 2, "an eviction")
    cache.removeValue(forKey: "c")
    #expect(cache.removals == 3)
    cache.removeValue(forKey: "nothing")
    cache.trim(toCost: 100)
    #expect(cache.removals == 3, "removing nothing removes nothing")
    cache.trim(toCost: 1)
    #expect(cache.removals == 4)
    cache.setValue(6, forKey: "e", cost: 1)
    #expect(cache.removeAll { $0 == "e" } == 1 && cache.removals == 5)
    cache.removeAll()
    #expect(cache.removals == 6)
    cache.setValue(7, forKey: "f", cost: 1)
    #expect(!cache.setValue(8, forKey: "f", cost: 1000))
    #expect(cache.removals == 7, "a refused value still sends the old one out")
  }

  @Test("the cost limit evicts as many old entries as needed")
  func costLimit() {
    let cache = MemoryCache<Int, String>(costLimit: 100, countLimit: 100, maxEntryFraction: 0.5)
    for key in 0..<4 { cache.setValue("v\(key)", forKey: key, cost: 25) }
    cache.setValue("big", forKey: 9, cost: 50)
    #expect(cache.keysByRecency == [9, 3, 2])
    #expect(cache.statistics.totalCost == 100)
  }

  @Test("an entry above the fraction is refused and replaces nothing stale")
  func oversizedEntry() {
    let cache = MemoryCache<Int, Int>(costLimit: 100, countLimit: 10, maxEntryFraction: 0.1)
    cache.setValue(1, forKey: 1, cost: 10)
    #expect(cache.setValue(2, forKey: 1, cost: 11) == false)
    #expect(cache.value(forKey: 1) == nil, "the old value must not survive a refused update")
    #expect(cache.statistics.count == 0)
  }

  @Test("trim and removeAll")
  func trimming() {
    let cache = MemoryCache<Int, Int>(costLimit: 1000, countLimit: 100)
    for key in 0..<10 { cache.setValue(key, forKey: key, cost: 10) }
    cache.trim(toCost: 35)
    #expect(cache.keysByRecency == [9, 8, 7])
    cache.removeAll()
    #expect(cache.statistics.count == 0 && cache.statistics.totalCost == 0)
  }

  @Test("random operations match a reference model and never break the limits")
  func randomised() {
    var generator = SeededRandom(seed: 42)
    let cache = MemoryCache<Int, Int>(costLimit: 500, countLimit: 20, maxEntryFraction: 0.2)
    var model: [(key: Int, value: Int, cost: Int)] = []  // most recent first
    for step in 0..<20_000 {
      let key = Int.random(in: 0..<60, using: &generator)
      if Bool.random(using: &generator) {
        let cost = Int.random(in: 0...120, using: &generator)
        cache.setValue(step, forKey: key, cost: cost)
        model.removeAll { $0.key == key }
        if cost <= 100 {
          model.insert((key, step, cost), at: 0)
          while model.count > 20 || model.reduce(0, { $0 + $1.cost }) > 500 { model.removeLast() }
        }
      } else {
        let got = cache.value(forKey: key)
        if let i = model.firstIndex(where: { $0.key == key }) {
          #expect(got == model[i].value)
          model.insert(model.remove(at: i), at: 0)
        } else {
          #expect(got == nil)
        }
      }
      let stats = cache.statistics
      #expect(stats.count <= 20 && stats.totalCost <= 500)
    }
    #expect(cache.keysByRecency == model.map(\.key))
  }
}

/// Groups: the variants of one source bounded, oldest out first, others untouched.
@Suite("Memory cache groups")
struct MemoryCacheGroupTests {
  @Test("a group holds at most its limit: a new entry beyond it sends the group's oldest out")
  func groupLimit() {
    let cache = MemoryCache<String, Int>(
      costLimit: 1000, countLimit: 1000, maxEntryFraction: 1,
      grouping: .init(limit: 3) { String($0.prefix(1)) })
    cache.setValue(0, forKey: "b0", cost: 1)
    for index in 0..<5 { cache.setValue(index, forKey: "a\(index)", cost: 1) }
    #expect(Set(cache.keysByRecency) == ["a2", "a3", "a4", "b0"])
    // Reading an entry does not make it younger in its group: oldest stored goes first.
    _ = cache.value(forKey: "a2")
    let (_, evicted) = cache.insert(9, forKey: "a9", cost: 1)
    #expect(evicted == ["a2"])
    // Removing one makes room without an eviction; replacing one keeps the count.
    cache.removeValue(forKey: "a3")
    #expect(cache.insert(1, forKey: "a1", cost: 1).evicted.isEmpty)
    #expect(cache.insert(2, forKey: "a1", cost: 1).evicted.isEmpty)
    #expect(Set(cache.keysByRecency) == ["a1", "a4", "a9", "b0"])
    cache.removeAll()
    for index in 0..<4 { cache.setValue(index, forKey: "a\(index)", cost: 1) }
    #expect(cache.statistics.count == 3, "the grouping survives removeAll")
  }
}
