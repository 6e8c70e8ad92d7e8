"""HTTP client for the upstream provider's read-only API (history, NFT owners, NFTs by creators)."""
