"""`export --libsvm MODEL.h5 OUT.model`: a ppack kernel model as LIBSVM model files (rank 0 writes)."""
from ..mpi.comm import on_rank0
from ..registry import KERNEL_TABLE
from .common import Report, check_outputs


def add_parser(sub):
    e = sub.add_parser("export", help="write a kernel model in another program's format (LIBSVM)")
    e.add_argument("model", help="ppack kernel model written by train, with a kernel LIBSVM has ("
                   + ", ".join(k.name for k in KERNEL_TABLE if k.libsvm_type) + ")")
    e.add_argument("output", help="file to write; a K-class model writes K files OUTPUT.<label>.model, class "
                                  "<label> against the rest (rest label -1, or one less than the smallest class "
                                  "when -1 is a class)")
    fmt = e.add_mutually_exclusive_group(required=True)
    fmt.add_argument("--libsvm", action="store_true",
                     help="a LIBSVM model file (svm_type c_svc, epsilon_svr or one_class, as the model's), as "
                          "LIBSVM's svm_save_model writes")
    e.add_argument("--quiet", action="store_true", help="print only errors")


def run(comm, args):
    from ..model.libsvm_file import export_libsvm

    check_outputs(comm, {"output": args.output})
    written = on_rank0(comm, export_libsvm, args.model, args.output)
    say = Report(comm, args.quiet)
    for path, total_sv in written or ():
        say(f"wrote {path}: LIBSVM model, {total_sv} support vectors")
