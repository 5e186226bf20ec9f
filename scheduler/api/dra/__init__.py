"""Dynamic Resource Allocation's pure core: the session's view of claims, classes and slices
(``view``), the devices the slices publish (``inventory``), CEL selectors (``cel``) and the
structured allocator (``allocator``). docs/dra.md describes what the scheduler does with them."""
