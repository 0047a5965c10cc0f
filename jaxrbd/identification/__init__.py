"""Identification of robot dynamics from recorded motion and effort.

From a log file to a validated model: `Recording` (loading, resampling, zero-phase
filtering, differentiation, splits, `Recording.shift` with a delay chosen by
`estimate_delay`), the linear joint terms (`FrictionModel`: armature,
viscous and Coulomb friction, offsets) and nonlinear ones fitted with them
(`NonlinearFriction`: `stribeck_friction`, `sigmoid_friction`), payloads, drive gains
identified from motor currents (`fit_drive_gains`), the identifiable base parameters
(`base_parameters`, Gautier 1990), least-squares estimates with standard deviations, a
physically consistent fit (`consistent_fit`, log-Cholesky with a prior,
Levenberg-Marquardt) whose prior weight is chosen by validation (`select_prior_weight`),
the physically consistent simulation-error fit for positions-only logs
(`simulation_error_fit`, windows simulated through `jaxrbd.rollout`; `simulation_rms`
scores a model the same way), excitation design (`fourier_trajectory`,
`optimize_excitation`, Swevers et al. 1997), reports (`torque_report`) and checked,
cached downloads of public recordings (`cached_download`). See
``docs/identification.md``.
"""

from ._base import BaseParameters as BaseParameters
from ._base import base_parameters as base_parameters
from ._base import condition_number as condition_number
from ._base import pivoted_qr as pivoted_qr
from ._delay import DelayEstimate as DelayEstimate
from ._delay import estimate_delay as estimate_delay
from ._download import cache_directory as cache_directory
from ._download import cached_download as cached_download
from ._drive import FrictionModel as FrictionModel
from ._drive import NonlinearFriction as NonlinearFriction
from ._drive import add_payload as add_payload
from ._drive import identification_regressor as identification_regressor
from ._drive import payload_parameters as payload_parameters
from ._drive import sigmoid_friction as sigmoid_friction
from ._drive import smooth_sign as smooth_sign
from ._drive import stacked_regressor as stacked_regressor
from ._drive import stribeck_friction as stribeck_friction
from ._estimators import ConsistentFit as ConsistentFit
from ._estimators import LeastSquaresResult as LeastSquaresResult
from ._estimators import PriorWeightSelection as PriorWeightSelection
from ._estimators import consistent_fit as consistent_fit
from ._estimators import fit_residual as fit_residual
from ._estimators import identified_model as identified_model
from ._estimators import least_squares as least_squares
from ._estimators import pseudo_inertia as pseudo_inertia
from ._estimators import select_prior_weight as select_prior_weight
from ._estimators import standard_parameters as standard_parameters
from ._estimators import weighted_least_squares as weighted_least_squares
from ._excitation import ExcitationResult as ExcitationResult
from ._excitation import fourier_trajectory as fourier_trajectory
from ._excitation import optimize_excitation as optimize_excitation
from ._gains import DriveGainFit as DriveGainFit
from ._gains import fit_drive_gains as fit_drive_gains
from ._gains import payload_torque as payload_torque
from ._recording import Recording as Recording
from ._recording import butterworth_filtfilt as butterworth_filtfilt
from ._recording import concatenate_recordings as concatenate_recordings
from ._reports import TorqueReport as TorqueReport
from ._reports import plot_torques as plot_torques
from ._reports import torque_report as torque_report
from ._simulation import SimulationFit as SimulationFit
from ._simulation import shooting_windows as shooting_windows
from ._simulation import simulate_windows as simulate_windows
from ._simulation import simulation_error_fit as simulation_error_fit
from ._simulation import simulation_rms as simulation_rms
