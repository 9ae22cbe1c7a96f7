"""LoopCompletions: futures completed from other threads, one loop wakeup per burst."""

from __future__ import annotations

import asyncio
import threading

from mqstore.services.writer.completions import LoopCompletions


def test_a_burst_from_another_thread_wakes_the_loop_once() -> None:
    async def main() -> tuple[list[int], int]:
        loop = asyncio.get_running_loop()
        completions = LoopCompletions(loop)
        wakeups = 0
        schedule = loop.call_soon_threadsafe

        def counting(callback, *arguments):  # type: ignore[no-untyped-def]
            nonlocal wakeups
            wakeups += 1
            return schedule(callback, *arguments)

        loop.call_soon_threadsafe = counting  # type: ignore[method-assign,assignment]
        pairs = [completions.future() for _ in range(64)]
        # One thread delivers all 64 before the loop runs again (as a group commit does).
        thread = threading.Thread(target=lambda: [deliver(index) for index, (_, deliver)
                                                  in enumerate(pairs)])
        thread.start()
        thread.join()
        values = await asyncio.gather(*(future for future, _ in pairs))
        return list(values), wakeups

    values, wakeups = asyncio.run(main())
    assert values == list(range(64))
    assert wakeups == 1


def test_a_cancelled_future_is_dropped_and_the_rest_complete() -> None:
    async def main() -> list[object]:
        completions = LoopCompletions(asyncio.get_running_loop())
        (gone, deliver_gone), (kept, deliver_kept) = completions.future(), completions.future()
        gone.cancel()  # its request went away (client reset)
        deliver_gone("late")
        deliver_kept("answer")
        return [await kept, gone.cancelled()]

    assert asyncio.run(main()) == ["answer", True]
