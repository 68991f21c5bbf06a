"""The user's MCP servers as agent tools.

- :mod:`.config`: the ``mcpServers`` JSON format, where it is read from, and which project files the
  user approved (by path and sha256, in the user's own state);
- :mod:`.client`: one background event-loop thread per kernel session, one connection per server;
  the main thread waits on futures with timeouts;
- :mod:`.tools`: each server tool as a :class:`~qloop_kernel.tools.runtime.Tool` named
  ``mcp__<server>__<tool>``: its JSON schema checked before the call, its risk class from the
  server's hints (which only raise the approval need unless the server is trusted), its result as
  tool_result blocks;
- :mod:`.servers`: the kernel session's servers, their state and their secrets.

Everything here imports without IPython; the notebook side is :mod:`qloop_kernel.notebook.mcp`.
"""
