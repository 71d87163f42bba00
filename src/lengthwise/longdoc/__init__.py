"""Long documents: read a text longer than the model's window whole (see the long-documents issue)."""
