"""What may run without asking, and why: the one permission pipeline's parts.

``risk`` reads code and tool input into a risk class and the variables a step may change;
``permissions`` holds the policies (which classes run without asking) and the decision types;
``grants`` holds the approvals a user gave for later calls. ``tools.runtime.ToolRuntime`` runs them in
order for every step, whatever its source.
"""
