# dod/_table_insert.pxd: the value gate of a table's Python face: values
# checked and converted to a column's dtype and row shape, and the insert
# that writes them (Table.insert, Table.insert_many; update and item
# assignment share the gate).
from dod._table_owner cimport TableOwner
from dod.schema cimport Column


cdef bint _broadcastable(tuple src, tuple dst)
cdef object _convert(object value, Column col)
# Validate everything, write the new rows beyond `count`, then commit: the
# new row's handle (single) or an array of the n new handles.
cdef object _insert(TableOwner self, object values, dict named, object n_obj, bint single)
