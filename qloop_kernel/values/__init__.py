"""What the agent knows of the user's values without computing or copying them.

``summaries`` describes a value for the model (frames, arrays, tensors, lazy and distributed objects,
databases) from metadata and bounded samples; ``fingerprint`` tells whether a value changed, for the
step's effect, undo and the drift check of replays.
"""
