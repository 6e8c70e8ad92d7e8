"""HTTP client for the upstream provider: history, NFT owners, NFTs by creators, and the Streams host's other
operations (streams, stats, delivery logs; replays, status changes and re-sent blocks, which change state
at the provider and are never re-sent once they may have arrived)."""
