"""Exceptions shared by every module of dod."""


class InvariantError(AssertionError, RuntimeError):
    """An owner's ``check()`` found one of its stated invariants broken.

    Raised by ``check()`` on every allocator and table, in every build and
    under ``python -O`` (it is never an ``assert``). It subclasses
    AssertionError and RuntimeError, so code written against the older,
    per-module exceptions keeps catching it.
    """


class EscapeWarning(UserWarning):
    """Arrays allocated inside a dod allocator scope were still alive at its end.

    Their memory stays valid (the scope rewound only above them) and returns
    at a later rewind or reset once they are gone. Issued by
    ``Arena.numpy()`` blocks and by ``dod.cuda``'s allocator scope.
    """


class StallError(TimeoutError):
    """A wait that can never end: the other side cannot make progress.

    Raised instead of waiting forever by :meth:`dod.ring.Ring.acquire_write`
    / ``acquire_read`` (the other side held by the waiting thread itself, or
    by a thread that has ended), by
    :meth:`dod.ring_producer.RingProducer.take` (the producer parked on
    another ring the consumer has not drained, or never started) and so by
    ``ScanStream.take``. The message carries both sides' state. It
    subclasses TimeoutError: ``except TimeoutError`` catches a bounded wait
    that ran out and a stall alike.
    """
