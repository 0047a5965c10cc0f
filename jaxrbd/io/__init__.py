"""Model loaders: URDF (`load_urdf`) and MJCF through MuJoCo's compiler (`load_mjcf`),
with the converters between MuJoCo's ``qpos``/``qvel``/``qacc``/``qfrc`` and jaxrbd's
``q``/``v``/``qdd``/``tau``."""

from ._mjcf import MJCFInfo as MJCFInfo
from ._mjcf import load_mjcf as load_mjcf
from ._mjcf_convert import gravity_compensation_forces as gravity_compensation_forces
from ._mjcf_convert import q_to_qpos as q_to_qpos
from ._mjcf_convert import qacc_to_qdd as qacc_to_qdd
from ._mjcf_convert import qdd_to_qacc as qdd_to_qacc
from ._mjcf_convert import qfrc_to_tau as qfrc_to_tau
from ._mjcf_convert import qpos_to_q as qpos_to_q
from ._mjcf_convert import qvel_to_v as qvel_to_v
from ._mjcf_convert import tau_to_qfrc as tau_to_qfrc
from ._mjcf_convert import v_to_qvel as v_to_qvel
from ._urdf import load_urdf as load_urdf
