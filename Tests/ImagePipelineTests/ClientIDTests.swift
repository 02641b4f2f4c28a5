import Testing

@testable import ImagePipeline

@Suite("Client identities")
struct ClientIDTests {
  @Test("an address's identity is the one its text names, made without the text")
  func addressIdentity() throws {
    var addresses: [IPAddress] = [
      .v4(0, 0, 0, 0), .v4(255, 255, 255, 255), .v4(10, 2, 30, 100), .v4(1, 23, 4, 5),
      .v4(127, 0, 0, 1), .v4(9, 99, 100, 199),
      .v6([0x20, 0x01, 0x0d, 0xb8] + [UInt8](repeating: 0, count: 11) + [1]),
      .v6([UInt8](repeating: 0, count: 15) + [1]),
    ]
    var random = SystemRandomNumberGenerator()
    for _ in 0..<200 {
      addresses.append(
        .v4(
          .random(in: 0...255, using: &random), .random(in: 0...255, using: &random),
          .random(in: 0...255, using: &random), .random(in: 0...255, using: &random)))
    }
    for address in addresses {
      #expect(ClientID(address: address) == ClientID(name: "address \(address)"), "\(address)")
    }
    #expect(ClientID(address: .v4(1, 2, 3, 4)) != ClientID(address: .v4(1, 2, 3, 5)))
  }
}
