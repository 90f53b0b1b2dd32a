"""The cost engine (issue 12): prices with their provenance; the pricing of a graph comes next."""
