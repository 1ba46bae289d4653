"""The dual coordinate optimizer of the kernel trainer (``--optimizer dual``): the C-SVC dual
solved one coordinate at a time on P-packSVM's packing (``solver``), its coordinate steps
(``coordinate``) and its shared draws with shrinking (``draws``)."""
