import ImagePipeline

extension FuzzTarget {
  /// Address and network literals, as in `allowed_networks` and URL hosts.
  static let ipAddress = FuzzTarget(
    name: "ip-address",
    covers:
      "IPAddress and IPNetwork: a parsed literal prints as text that parses back to it; a network contains its own first address",
    maxLength: 256
  ) { bytes in
    let literal = text(bytes)
    if let address = IPAddress(literal) {
      require(IPAddress(address.description) == address, "\(address) does not parse back")
    }
    if let network = IPNetwork(literal) {
      require(IPNetwork(network.description) == network, "\(network) does not parse back")
      if let first = IPAddress(String(network.description.split(separator: "/")[0])) {
        require(network.contains(first), "\(network) does not contain \(first)")
      }
    }
  }
}
