"""A hint to the CPU to start loading memory that will be read soon (LLVM's prefetch), for
numba code: the load overlaps with the work done until then instead of stalling the read."""
from llvmlite import ir as llvm_ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic


@intrinsic
def prefetch(typingctx, array, index):
    """Prefetch the cache line holding ``array[index]`` (a 1-D array, an integer index in
    range) into every cache level, for reading. No effect on values; no fault if unmapped."""
    if not isinstance(array, types.Array) or array.ndim != 1 or not isinstance(index, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        array_type = signature.args[0]
        values = context.make_array(array_type)(context, builder, args[0])
        pointer = cgutils.get_item_pointer(context, builder, array_type, values, [args[1]], wraparound=False)
        byte_pointer = llvm_ir.IntType(8).as_pointer()
        i32 = llvm_ir.IntType(32)
        function = cgutils.get_or_insert_function(
            builder.module, llvm_ir.FunctionType(llvm_ir.VoidType(), [byte_pointer, i32, i32, i32]),
            "llvm.prefetch.p0i8")
        # read (0), high temporal locality (3), data cache (1)
        builder.call(function, [builder.bitcast(pointer, byte_pointer), i32(0), i32(3), i32(1)])
        return context.get_dummy_value()
    return types.none(array, index), codegen
