"""The queue controller: Queue states, OpenQueue/CloseQueue commands, hierarchy, metrics."""
