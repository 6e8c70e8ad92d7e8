"""Fixed facts of the simulated chains: chain ids, block times, and well-known token contracts.

The NFT contracts listed here appear both in history payloads (nftTransfers) and in the owners
operation, so the demo can follow a contract from a delivery to its owners.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Chain:
    name: str
    hex_id: str
    block_seconds: float
    # Blocks after a block before the provider sends its confirmed delivery (its published finality).
    confirmations: int
    anchor_block: int
    native_symbol: str

    @property
    def confirm_seconds(self) -> float:
        """Seconds from a block to its finality: confirmations × block time."""
        return self.confirmations * self.block_seconds


# Block numbers at 2024-01-01T00:00:00Z; later blocks are extrapolated from the block time.
ANCHOR_TS = 1_704_067_200

CHAINS: tuple[Chain, ...] = (
    Chain("eth", "0x1", 12.0, 12, 18_908_895, "ETH"),
    Chain("goerli", "0x5", 12.0, 12, 10_320_000, "ETH"),
    Chain("sepolia", "0xaa36a7", 12.0, 12, 4_990_000, "ETH"),
    Chain("polygon", "0x89", 2.1, 100, 51_766_000, "MATIC"),
    Chain("mumbai", "0x13881", 2.1, 100, 43_900_000, "MATIC"),
    Chain("bsc", "0x38", 3.0, 18, 34_900_000, "BNB"),
    Chain("bsc testnet", "0x61", 3.0, 18, 36_100_000, "tBNB"),
    Chain("avalanche", "0xa86a", 2.0, 100, 40_300_000, "AVAX"),
    Chain("fantom", "0xfa", 1.0, 100, 72_500_000, "FTM"),
    Chain("palm", "0x2a15c308d", 5.0, 20, 23_800_000, "PALM"),
    Chain("cronos", "0x19", 5.7, 100, 11_900_000, "CRO"),
    Chain("arbitrum", "0xa4b1", 0.26, 100, 166_000_000, "ETH"),
)
CHAINS_BY_HEX = {c.hex_id: c for c in CHAINS}
CHAINS_BY_NAME = {c.name: c for c in CHAINS}


def chain_for(value: str) -> Chain | None:
    """A chain by name or hex id, as the owners operation accepts it."""
    key = value.strip().lower()
    return CHAINS_BY_NAME.get(key) or CHAINS_BY_HEX.get(key)


def block_at(chain: Chain, ts: float) -> int:
    return chain.anchor_block + int((ts - ANCHOR_TS) / chain.block_seconds)


def block_time(chain: Chain, number: int) -> float:
    """When block `number` was mined: the chain makes one every `block_seconds` from its anchor."""
    return ANCHOR_TS + (number - chain.anchor_block) * chain.block_seconds


@dataclass(frozen=True)
class NftContract:
    chain_hex: str
    address: str
    name: str
    symbol: str
    contract_type: str
    # Contracts the simulator has "indexed" before it started answer SYNCED at once.
    pre_indexed: bool


NFT_CONTRACTS: tuple[NftContract, ...] = (
    NftContract(
        "0x1", "0xbc4ca0eda7647a8ab7c2061c2e118a18a936f13d", "BoredApeYachtClub", "BAYC", "ERC721", True
    ),
    NftContract("0x1", "0xed5af388653567af2f388e6224dc7c4b3241c544", "Azuki", "AZUKI", "ERC721", True),
    NftContract("0x1", "0x76be3b62873462d2142405439777e971754e8e77", "parallel", "LL", "ERC1155", False),
    NftContract(
        "0x89",
        "0x2953399124f0cbb46d2cbacd8a89cf0599974963",
        "OpenSea Collections",
        "OPENSTORE",
        "ERC1155",
        False,
    ),
    NftContract(
        "0x89", "0xa9a6a3626993d487d2dbda3173cf58ca1a9d9e9f", "Unstoppable Domains", "UD", "ERC721", True
    ),
    NftContract(
        "0xa4b1", "0x6325439389e0797ab35752b4f43a14c004f22a9c", "Smol Brains", "SMOLBRAIN", "ERC721", False
    ),
)


def nft_contracts_on(chain_hex: str) -> list[NftContract]:
    return [c for c in NFT_CONTRACTS if c.chain_hex == chain_hex]


def known_nft_contract(chain_hex: str, address: str) -> NftContract | None:
    address = address.lower()
    for c in NFT_CONTRACTS:
        if c.chain_hex == chain_hex and c.address == address:
            return c
    return None


@dataclass(frozen=True)
class Erc20Token:
    chain_hex: str
    address: str
    name: str
    symbol: str
    decimals: int


ERC20_TOKENS: tuple[Erc20Token, ...] = (
    Erc20Token("0x1", "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48", "USD Coin", "USDC", 6),
    Erc20Token("0x1", "0xdac17f958d2ee523a2206206994597c13d831ec7", "Tether USD", "USDT", 6),
    Erc20Token("0x38", "0x55d398326f99059ff775485246999027b3197955", "Tether USD", "USDT", 18),
    Erc20Token("0x89", "0x2791bca1f2de4661ed88a30c99a7a9449aa84174", "USD Coin (PoS)", "USDC", 6),
    Erc20Token("0xa86a", "0xb97ef9ef8734c71904d8002f8b6bc66dd9c48a6e", "USD Coin", "USDC", 6),
    Erc20Token("0xa4b1", "0xaf88d065e77c8cc2239327c5edb3a432268e5831", "USD Coin", "USDC", 6),
)


def erc20_tokens_on(chain_hex: str) -> list[Erc20Token]:
    return [t for t in ERC20_TOKENS if t.chain_hex == chain_hex]
