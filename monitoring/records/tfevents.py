"""TensorBoard event files into scalar points, a whole record at a time.

A file is TFRecord framing around `Event` protobufs: an 8-byte little-endian length, its
masked CRC32C, the data, the data's masked CRC32C. Reading starts where the last read
stopped and stops before a record not yet written in whole (the next poll reads it).
Nothing here can stall a file: a record longer than MAX_RECORD_BYTES is passed over by its
length without being read, one whose data fails its CRC or does not parse is skipped, and
a length that fails its CRC is searched past a byte at a time (8 bytes checked at each),
so the work is linear in the bytes read. Scalars are `simple_value`s and scalar tensors
(TF2's `tf.summary.scalar`); images, histograms, text and graphs are left out. A NaN or
infinite scalar is kept: it is a gap at its step, as on stdout.
"""

import struct
from dataclasses import dataclass, field

import google_crc32c
from google.protobuf.message import DecodeError
from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.compat.proto.types_pb2 import DT_DOUBLE, DT_FLOAT, DT_HALF, DT_INT32, DT_INT64

from monitoring.records.names import record_name

MAX_RECORD_BYTES = 64 * 1024
HEADER_BYTES = 12  # length and its CRC
FOOTER_BYTES = 4  # the data's CRC
_MASK_DELTA = 0xA282EAD8
_LENGTH = struct.Struct("<Q")
_CRC = struct.Struct("<I")
# Scalar tensors: the repeated field each dtype's value is in, and the packed form's layout.
_TENSOR_VALUES = {
    DT_FLOAT: ("float_val", "<f"),
    DT_DOUBLE: ("double_val", "<d"),
    DT_HALF: ("half_val", "<e"),
    DT_INT32: ("int_val", "<i"),
    DT_INT64: ("int64_val", "<q"),
}


@dataclass
class EventsRead:
    """Points (tag's series name, step, value) and how far the file is read: `consumed` may
    pass the end of the bytes given, past a record too long to read."""

    points: list[tuple[str, int, float]] = field(default_factory=list)
    consumed: int = 0
    skipped_records: int = 0  # too long, bad CRC, unparsable
    skipped_bytes: int = 0  # searched past after a bad length


def masked_crc(data: bytes | memoryview) -> int:
    crc = google_crc32c.value(bytes(data))
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def read_events(data: bytes) -> EventsRead:
    """The scalars of the whole records in `data`, which starts at a record's first byte."""
    read = EventsRead()
    view = memoryview(data)
    at = 0
    while len(data) - at >= HEADER_BYTES:
        (length,) = _LENGTH.unpack_from(view, at)
        (length_crc,) = _CRC.unpack_from(view, at + 8)
        if masked_crc(view[at : at + 8]) != length_crc:
            at += 1  # not a record's start: look for the next one
            read.skipped_bytes += 1
            continue
        end = at + HEADER_BYTES + length + FOOTER_BYTES
        if length > MAX_RECORD_BYTES:
            read.skipped_records += 1
            at = end
            continue
        if end > len(data):
            break  # not written in whole yet
        body = view[at + HEADER_BYTES : at + HEADER_BYTES + length]
        (body_crc,) = _CRC.unpack_from(view, end - FOOTER_BYTES)
        if masked_crc(body) != body_crc or not _scalars(bytes(body), read.points):
            read.skipped_records += 1
        at = end
    read.consumed = at
    return read


def _scalars(body: bytes, points: list[tuple[str, int, float]]) -> bool:
    """Adds the event's scalar values to `points`; False when it does not parse."""
    try:
        event = Event.FromString(body)
    except DecodeError:
        return False
    if event.WhichOneof("what") != "summary":
        return True  # a file version, graph, session log...
    for value in event.summary.value:
        number = _scalar(value)
        if number is not None and value.tag:
            points.append((record_name(value.tag), event.step, number))
    return True


def _scalar(value: Summary.Value) -> float | None:
    kind = value.WhichOneof("value")
    if kind == "simple_value":
        return float(value.simple_value)
    if kind != "tensor" or value.tensor.tensor_shape.dim:
        return None  # an image, a histogram, or a tensor with dimensions
    tensor = value.tensor
    layout = _TENSOR_VALUES.get(tensor.dtype)
    if layout is None:
        return None  # a string (text), a bool...
    values_field, packed = layout
    if tensor.tensor_content:
        size = struct.calcsize(packed)
        if len(tensor.tensor_content) != size:
            return None
        return float(struct.unpack(packed, tensor.tensor_content)[0])
    values = getattr(tensor, values_field)
    if len(values) != 1:
        return None
    if tensor.dtype == DT_HALF:  # halves are carried as their bits in an int32
        return float(struct.unpack("<e", struct.pack("<H", values[0] & 0xFFFF))[0])
    return float(values[0])
