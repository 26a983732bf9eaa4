"""Storage tiers and safe relocation of InnoDB components: detect, provision, characterize, move, persist."""
