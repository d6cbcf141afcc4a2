"""Known mistakes per exercise: instructor side only, never shipped to students."""
