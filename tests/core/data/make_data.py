"""Regenerates the small .npy files test_npy.cpp reads (numpy 1.24): python3 make_data.py"""
import numpy as np

np.save("u1.npy", np.array([0, 1, 127, 255], dtype=np.uint8))
np.save("i1.npy", np.array([-128, -1, 0, 127], dtype=np.int8))
np.save("i2.npy", np.array([[-32768, -1], [2, 32767]], dtype=np.int16))
np.save("u2.npy", np.array([0, 1, 65535], dtype=np.uint16))
np.save("i4.npy", np.array([-2147483648, -5, 7, 2147483647], dtype=np.int32))
np.save("i8.npy", np.array([[-9223372036854775808, -1, 0], [1, 2**40, 9223372036854775807]], dtype=np.int64))
np.save("f2.npy", np.array([1.0, -2.5, 65504.0, 2.0**-24, np.inf], dtype=np.float16))
np.save("f4.npy", np.array([[0.5, -1.25, 3.0], [1e-30, -np.inf, 100.0]], dtype=np.float32))
np.save("f8.npy", np.array([0.1, -2.0**-1074, 1e300], dtype=np.float64))
np.save("c8.npy", np.array([1 + 2j, -3.5 - 0.25j], dtype=np.complex64))
np.save("c16.npy", np.array([[0.1 + 0.2j], [-1e200 + 1j]], dtype=np.complex128))
np.save("b1.npy", np.array([True, False, False, True, True], dtype=np.bool_))
np.save("scalar_f8.npy", np.array(3.5, dtype=np.float64))
np.save("empty_f4_0x3.npy", np.zeros((0, 3), dtype=np.float32))
np.save("fortran_f4_2x3.npy", np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3)))
np.save("fortran_i2_2x3x4.npy", np.asfortranarray(np.arange(24, dtype=np.int16).reshape(2, 3, 4)))
with open("v2_f8.npy", "wb") as f:
    np.lib.format.write_array(f, np.array([[1.5, 2.5]]), version=(2, 0))
with open("v3_i4.npy", "wb") as f:
    np.lib.format.write_array(f, np.array([7, 8, 9], dtype=np.int32), version=(3, 0))
np.save("big_endian_f4.npy", np.array([1.0, 2.0], dtype=">f4"))
np.save("structured.npy", np.zeros(2, dtype=[("a", "<f4"), ("b", "<i4")]))
np.save("u4.npy", np.array([1, 2], dtype=np.uint32))
