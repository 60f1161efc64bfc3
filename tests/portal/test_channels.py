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
