"""What the benchmarks share for their figures."""


def pyplot():
    """matplotlib's pyplot drawing to files (the Agg backend), or None when matplotlib is absent."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no figure (pip install -e '.[bench]')")
        return None
    return plt
