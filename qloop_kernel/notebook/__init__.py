"""Everything that imports IPython, ipykernel or ipywidgets: the magics, the kernel agent, the approval
card, the turn display, the shell pump, the record store, replay and the ``run_code`` tool."""
