"""Value generators for the demo shop: names, emails, prose, money, profiles and tags.

Every function takes the caller's `random.Random`, so a given seed always yields the same data.
"""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from functools import cache

# (display name, ASCII form for email addresses): some names are deliberately non-ASCII so that
# encoding bugs anywhere downstream show up in the demo.
FIRST_NAMES: tuple[tuple[str, str], ...] = (
    ("Anna", "anna"),
    ("Ben", "ben"),
    ("Chloé", "chloe"),
    ("David", "david"),
    ("Emma", "emma"),
    ("François", "francois"),
    ("Grace", "grace"),
    ("Hiroshi", "hiroshi"),
    ("Inès", "ines"),
    ("Jonas", "jonas"),
    ("Łukasz", "lukasz"),
    ("Maria", "maria"),
    ("Noah", "noah"),
    ("Olivia", "olivia"),
    ("Priya", "priya"),
    ("Søren", "soren"),
    ("Yuki", "yuki"),
    ("Zoë", "zoe"),
    ("さくら", "sakura"),
    ("José", "jose"),
)
LAST_NAMES: tuple[tuple[str, str], ...] = (
    ("Müller", "mueller"),
    ("Smith", "smith"),
    ("García", "garcia"),
    ("Nowak", "nowak"),
    ("Dubois", "dubois"),
    ("Rossi", "rossi"),
    ("Johansson", "johansson"),
    ("Kowalczyk", "kowalczyk"),
    ("渡辺", "watanabe"),
    ("Patel", "patel"),
    ("O'Brien", "obrien"),
    ("Brown", "brown"),
    ("Ødegaard", "odegaard"),
    ("Silva", "silva"),
    ("Nguyễn", "nguyen"),
    ("Lee", "lee"),
)
DOMAINS: tuple[str, ...] = ("example.com", "example.org", "mail.example.net", "shop.example")
COUNTRIES: tuple[str, ...] = ("DE", "FR", "PL", "JP", "US", "GB", "BR", "IN")
TIERS: tuple[str, ...] = ("bronze", "silver", "gold", "platinum")
CITIES: tuple[str, ...] = ("Berlin", "Paris", "Kraków", "東京", "Austin", "Leeds", "São Paulo")
TAGS: tuple[str, ...] = (
    "new", "sale", "eco", "bestseller", "limited", "gift", "outdoor", "kitchen", "kids", "tech",
)  # fmt: skip
ADJECTIVES: tuple[str, ...] = (
    "Classic", "Compact", "Deluxe", "Ergonomic", "Handmade", "Lightweight", "Organic", "Rustic",
    "Sleek", "Vintage", "Waterproof", "Smart",
)  # fmt: skip
NOUNS: tuple[str, ...] = (
    "Backpack", "Blender", "Candle", "Chair", "Headphones", "Kettle", "Lamp", "Mug", "Notebook",
    "Scarf", "Teapot", "Umbrella", "Watch", "Wallet",
)  # fmt: skip
WORDS: tuple[str, ...] = (
    "alpha", "amber", "bright", "cedar", "delta", "ember", "fjord", "glade", "harbor", "indigo",
    "jade", "kestrel", "lumen", "meadow", "nectar", "orbit", "prism", "quartz", "river", "saffron",
    "timber", "umber", "velvet", "willow", "xenon", "yarrow", "zephyr", "café", "naïve", "größe",
    "żółw", "日本", "order", "delivery", "customer", "returned", "loyal", "prefers", "weekend",
)  # fmt: skip

LONG_TEXT_MIN = 9 * 1024
LONG_TEXT_MAX = 12 * 1024
_EPOCH = datetime(2023, 1, 1, tzinfo=UTC)
_TWO_YEARS = 2 * 365 * 24 * 3600


def person(rng: random.Random) -> tuple[str, str]:
    """A display name and the ASCII handle used to build its email address."""
    first, first_ascii = rng.choice(FIRST_NAMES)
    last, last_ascii = rng.choice(LAST_NAMES)
    return f"{first} {last}", f"{first_ascii}.{last_ascii}"


def email(rng: random.Random, handle: str, unique: int) -> str:
    # The unique part (a customer id) is what keeps the UNIQUE constraint happy across runs.
    return f"{handle}.{unique}@{rng.choice(DOMAINS)}"


def sentence(rng: random.Random, low: int = 4, high: int = 16) -> str:
    return " ".join(rng.choices(WORDS, k=rng.randint(low, high))).capitalize() + "."


def long_text(rng: random.Random) -> str:
    """9-12 KB of prose: with STORAGE EXTERNAL this is always stored out of line, uncompressed."""
    target = rng.randint(LONG_TEXT_MIN, LONG_TEXT_MAX)
    # A random window of a fixed corpus: drawing ~1,500 words per value would dominate the seed.
    corpus = _corpus()
    start = rng.randrange(len(corpus) - target)
    body = corpus[start : start + target]  # at least `target` bytes: every char is >= 1 byte
    return (sentence(rng) + " " + body).encode()[:target].decode(errors="ignore")


@cache
def _corpus() -> str:
    return " ".join(random.Random("changelake-corpus").choices(WORDS, k=20_000))


def money(rng: random.Random, low_cents: int, high_cents: int) -> Decimal:
    return Decimal(rng.randint(low_cents, high_cents)).scaleb(-2)


def balance(rng: random.Random) -> Decimal:
    """Mostly positive, sometimes exactly zero, sometimes in debt."""
    roll = rng.random()
    if roll < 0.1:
        return Decimal("0.00")
    if roll < 0.25:
        return money(rng, -50_000, -1)
    return money(rng, 1, 1_000_000)


def profile(rng: random.Random) -> str | None:
    """A JSON document (as text, which COPY and jsonb both accept), or NULL now and then."""
    if rng.random() < 0.1:
        return None
    doc: dict[str, object] = {
        "tier": rng.choice(TIERS),
        "newsletter": rng.random() < 0.5,
        "address": {"city": rng.choice(CITIES), "zip": f"{rng.randint(1000, 99999):05d}"},
        "interests": rng.sample(TAGS, k=rng.randint(0, 3)),
    }
    if rng.random() < 0.3:
        doc["score"] = round(rng.uniform(0, 5), 2)
    return json.dumps(doc, ensure_ascii=False)


def tags(rng: random.Random) -> list[str] | None:
    if rng.random() < 0.1:
        return None
    return rng.sample(TAGS, k=rng.randint(0, 4))


def product_name(rng: random.Random) -> str:
    return f"{rng.choice(ADJECTIVES)} {rng.choice(NOUNS)}"


def past_time(rng: random.Random) -> datetime:
    """A moment in 2023-2024, so seeded rows look older than the ones the workload writes."""
    return _EPOCH + timedelta(seconds=rng.randrange(_TWO_YEARS))


def later(rng: random.Random, start: datetime) -> datetime:
    return start + timedelta(seconds=rng.randrange(90 * 24 * 3600))
