import asyncio

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer


def test_channel_layer_round_trip_through_redis() -> None:
    layer = get_channel_layer()
    assert type(layer).__name__ == "RedisChannelLayer"
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)("job.test", channel)
    async_to_sync(layer.group_send)("job.test", {"type": "job.delta", "offset": 42})
    message = async_to_sync(layer.receive)(channel)
    assert message == {"type": "job.delta", "offset": 42}
    async_to_sync(layer.group_discard)("job.test", channel)


def test_a_quiet_channel_waits_past_the_blocking_read() -> None:
    """No message for longer than channels-redis's 5 s read must not be an error."""
    layer = get_channel_layer()

    async def wait_quietly() -> None:
        channel = await layer.new_channel()
        with_timeout = asyncio.wait_for(layer.receive(channel), timeout=6.5)
        try:
            await with_timeout
        except TimeoutError:
            return  # our own deadline: the layer itself kept waiting

    async_to_sync(wait_quietly)()


def test_two_hundred_pages_opening_at_once_all_join_their_groups() -> None:
    """bench/latency.py's 100 clients: one WebSocket got a 500, redis-py's pool refusing a
    101st connection (its default of 100) while the others' group_add were in flight."""
    layer = get_channel_layer()

    async def open_pages() -> None:
        channels = [f"{await layer.new_channel()}" for _ in range(200)]
        await asyncio.gather(*(layer.group_add(f"job.{i}", c) for i, c in enumerate(channels)))
        await asyncio.gather(*(layer.group_discard(f"job.{i}", c) for i, c in enumerate(channels)))

    async_to_sync(open_pages)()
